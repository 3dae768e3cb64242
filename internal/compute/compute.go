// Package compute owns the seam between dispatch and the places a worker can run: a [Spec]
// describes one sandboxed process, a [Provider] starts it and can cancel it later (from any
// process), and [Exit] reports how it ended and which isolation actually applied.
//
// compute runs on the host side. It knows nothing about catalogs, dispatch records or
// secrets' values: secrets reach the worker only as open files in [Spec.Files], never in
// argv or the environment. Implementations live in subpackages (local, docker, kubernetes)
// and never import each other.
package compute

import (
	"context"
	"io"
	"os"
	"time"
)

// Bind makes the host path Src visible inside the sandbox at Dst. It is read-only unless
// Writable is set.
type Bind struct {
	Src, Dst string
	Writable bool
	// Result marks a writable bind the host reads after the process ends (the out
	// directory). A provider whose process does not see this host's file system (a
	// Kubernetes pod) MUST bring the bind's contents back into Src before [Handle.Wait]
	// returns; one that binds Src directly (bubblewrap, a local container) has nothing to do.
	Result bool
}

// HostUser is a host uid and gid.
type HostUser struct {
	UID, GID uint32
}

// Limits bounds one sandboxed process tree. A zero field takes the provider's default.
type Limits struct {
	// Timeout is the wall-clock budget; at the deadline the whole process tree is killed
	// and [Exit.TimedOut] is set. 0 means no timeout.
	Timeout time.Duration
	// MaxProcs caps the number of processes (RLIMIT_NPROC, and a cgroup pids.max where
	// available). 0 means the provider default (256 for local).
	MaxProcs int
	// FileSize caps the size of any file the sandbox writes, in bytes (RLIMIT_FSIZE).
	// 0 means the provider default (1 GiB for local).
	FileSize int64
	// Memory caps memory in bytes: the address space (RLIMIT_AS) and, where a writable
	// cgroup v2 with the memory controller exists, memory.max. 0 means the provider
	// default (4 GiB for local).
	Memory int64
	// Scratch caps each file system the sandbox may write besides its binds (/tmp, and
	// /dev/shm up to 256 MiB): in-memory file systems whose pages no per-process limit
	// counts. 0 means the provider default (1 GiB for local).
	Scratch int64
	// Disk caps what the sandbox's writable binds may hold together, in bytes: the target's
	// disk quota. The local provider leaves it to the dispatch's own quota (a tmpfs of this
	// size when agora is root); a remote worker's exporter caps the upload of its result
	// binds by it, counting files by their logical size. 0 means the provider default
	// (2 GiB for a remote upload).
	Disk int64
}

// Spec describes one sandboxed process. Paths in Argv, Dir and Bind.Dst are as seen
// inside the sandbox.
type Spec struct {
	// ID is the dispatch id; providers use it in names (cgroups, containers, jobs).
	ID string
	// Argv is the program and its arguments. Argv[0] is resolved with the PATH in Env.
	Argv []string
	// Env is the complete environment inside the sandbox: nothing is inherited from the
	// host. Providers add only PWD (set to Dir).
	Env []string
	// Dir is the working directory inside the sandbox ("/" when empty).
	Dir string
	// Binds are applied in order, after the provider's read-only system binds.
	Binds []Bind
	// Files are inherited by the process as fd 3, 4, ... in order. Secrets MUST travel
	// this way, never in Argv or Env.
	Files []*os.File
	// Network keeps the host network. When false the sandbox has its own network
	// namespace with only a loopback interface and no route out.
	Network bool
	Limits  Limits
	// Stdout and Stderr receive the process output as it is written; nil discards it.
	// Callers cap and redact.
	Stdout, Stderr io.Writer
	// Sandbox selects the isolation: "bwrap" (the default when empty) or "none", an
	// explicit escape that runs the process unisolated with only the limits and the clean
	// environment.
	Sandbox string
	// RunAs, when set, runs the process (for "bwrap", bwrap and everything under it) as this
	// host user instead of the provider's own. Only a root provider can do that, and a
	// provider that cannot MUST refuse the spec rather than ignore the field. Bind sources
	// MUST be readable by this user and writable binds writable by it; the directories above
	// them need not be (the local provider binds them from a private mount namespace). A
	// root caller SHOULD set it: the kernel never enforces RLIMIT_NPROC for host root, and a
	// process that escapes the sandbox is then not root on the host. The uid MUST NOT be 0.
	RunAs *HostUser
}

// Sandbox kinds for [Spec.Sandbox].
const (
	SandboxBwrap = "bwrap"
	SandboxNone  = "none"
)

// Exit reports how a sandboxed process ended.
type Exit struct {
	// Code is the exit status, or -1 when the process was killed by a signal.
	Code int
	// Signal names the signal that killed the process ("killed" for SIGKILL), if any.
	Signal string
	// TimedOut is set when [Limits.Timeout] expired and the tree was killed.
	TimedOut bool
	// Cancelled is set when the start context was cancelled or the provider that started
	// the process was asked to cancel it.
	Cancelled bool
	// Lost is set when the process vanished without an observed end (a deleted Job or pod,
	// a container removed behind the provider's back): nothing says how it ended.
	Lost bool
	// GatewayUnreachable is set when a remote worker (or its init step) gave up on agora's
	// network gateway after retrying it across an outage: it exited
	// remote.ExitGatewayUnreachable, which the agent cannot make it do. The dispatch failed
	// for want of the gateway, not for anything the agent did.
	GatewayUnreachable bool
	// Duration is the wall-clock time from start to exit.
	Duration time.Duration
	// Isolation records what applied, as "+"-joined tokens, e.g. "bwrap+rlimits+cgroup",
	// or exactly "none" for the unisolated escape. Each provider documents its tokens.
	Isolation string
}

// Handle is one started process.
type Handle interface {
	// TaskID identifies the process for [Provider.Cancel], from any process on the host
	// the provider targets. It is safe to store in a dispatch record.
	TaskID() string
	// Wait blocks until the process tree is gone and returns how it ended. It may be
	// called more than once and returns the same result.
	Wait() (Exit, error)
}

// Resumed is a [Handle] that tells whether its Start found the task of the spec's dispatch
// running already and follows it instead of starting one: a Kubernetes Job that an earlier
// supervisor of the dispatch made before it died (a leader killed between the Job and the
// dispatch's start record). The dispatch is then adopted, and its supervisor records it so.
type Resumed interface {
	Resumed() bool
}

// Provider runs [Spec]s.
type Provider interface {
	// Start starts s and returns once it runs. Cancelling ctx kills the process tree.
	Start(ctx context.Context, s Spec) (Handle, error)
	// Cancel kills the process tree named by taskID. It MUST be idempotent: cancelling a
	// task that already ended returns nil, and a stale taskID never harms another process.
	Cancel(ctx context.Context, taskID string) error
}

// Adopter is a provider whose tasks outlive the process that started them (a Kubernetes Job
// or Sandbox keeps running when its supervisor dies; a bubblewrap sandbox dies with it).
// Adopt returns a handle following the running task of s.ID, as Start would when it finds
// it, or nil and no error when there is none: it never starts a task. A supervisor host
// (`agora orch serve`) adopts through it the dispatches whose supervisor died.
type Adopter interface {
	Adopt(ctx context.Context, s Spec) (Handle, error)
}
