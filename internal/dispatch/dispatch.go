// Package dispatch runs one subagent on one target in a sandbox and keeps its durable record:
// resolve names to pinned digests, write the record (accepted) BEFORE anything starts, stage
// the bundle, fire the provider (started), then reconcile exactly one terminal state with refs
// to the patch, outputs and capped, redacted logs.
//
// dispatch runs on the host side. It unseals the secrets of the env bundles a dispatch names
// and hands them to the worker on a file descriptor only; it never puts them in argv, the
// environment of any process it starts, a record, a log or the audit trail. For the model
// runtimes (openai, claude-code) it runs one gateway per dispatch (package gateway) on a Unix
// socket bound into the sandbox; the model API key goes to that gateway and never to the
// sandbox.
package dispatch

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/agora-dev/agora/internal/blob"
	"github.com/agora-dev/agora/internal/catalog/view"
	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/egress"
	"github.com/agora-dev/agora/internal/runtimebin"
)

// Output caps: what is kept of a worker's streams, after redaction.
const (
	MaxStdout = 4 << 20
	MaxStderr = 1 << 20
)

// Unsealer returns the plaintext of a sealed secret reference.
type Unsealer func(ctx context.Context, ref string) ([]byte, error)

// Dispatcher resolves, records, runs and reconciles dispatches.
type Dispatcher struct {
	Records *Records
	Catalog *view.Catalog
	Blobs   *blob.Store
	Unseal  Unsealer
	// LocalProvider runs the dispatches of local targets (bubblewrap).
	LocalProvider compute.Provider
	// RemoteProviders returns the provider of a target that is not local (docker,
	// kubernetes), built from the target's settings; nil refuses such targets.
	RemoteProviders func(ctx context.Context, target string, t config.Target) (compute.Provider, error)
	Config          *config.Config
	// StateDir holds per-dispatch staging directories (AGORA_HOME/dispatches).
	StateDir string
	// AgoraBin is the agora binary: detached supervisors run it (`agora dispatch supervise`).
	// It is never bound into a sandbox; Worker is.
	AgoraBin string
	// Worker is the worker program bound read-only into every sandbox at wire.BinPath
	// (/agora/bin/agora-worker), pinned and hashed per dispatch (workerbin.go).
	Worker WorkerBinary
	// Egress is the policy of the dialer every dispatch's gateway sends model requests and
	// fetches through (agora.yaml egress.allow_private). The zero Policy reaches public
	// addresses only.
	Egress egress.Policy
	// EgressRoots are extra trusted root certificates (PEM, agora.yaml's egress.ca_certs):
	// the egress proxy verifies upstream hosts with them besides the system's, and the
	// sandbox's trust store holds them.
	EgressRoots []byte
	// Resolver resolves the names the gateway and the egress proxy dial; nil means the
	// system's. Every address it returns is vetted against Egress all the same.
	Resolver egress.Resolver
	// Runtimes resolves the host-installed agent CLIs bound into model runtimes' sandboxes
	// (claude for claude-code); nil resolves without a cache across processes.
	Runtimes *runtimebin.Resolver
	// RuntimeCopies, when set, holds the execute-only copies of those CLIs that local
	// sandboxes bind instead of the host's files (AGORA_HOME/runtime-bin, see
	// runtimebin.ExecOnly): the CLI runs non-dumpable, so its tools cannot read its /proc
	// entries. "" binds the host's file (tests that build a Dispatcher themselves).
	RuntimeCopies string
	// Tracer exports the dispatch's spans (trace.go); nil records no trace.
	Tracer Tracer
	// Log receives what a command cannot return as an error (a reap that must retry); nil
	// logs to slog's default logger (stderr).
	Log *slog.Logger
	Now func() time.Time
	// Warm holds the warm slots of a resident process (StartWarm); nil: every dispatch
	// starts its sandbox cold.
	Warm *WarmPools
	// Adopt, set by a supervisor host (`agora orch serve`), makes Reap adopt the started
	// dispatches whose supervisor died while their worker runs on (adopt.go); nil: Reap
	// leaves them live for [OrphanWait], for a supervisor host to adopt.
	Adopt *Adoption
	// teardowns, set by [Dispatcher.BackgroundTeardowns], runs the releases Supervise
	// leaves behind when it returns; nil: Supervise releases before it returns.
	teardowns *teardowns

	// testOnlyInvokingUser makes a root agora stage and run sandboxes as an unprivileged one
	// does (as the invoking user, no disk quota), so tests running as root cover that path.
	testOnlyInvokingUser bool
	// testOnlyCancelWait, when set, is Cancel's wait for a live supervisor in place of
	// cancelWait: a test of a stuck supervisor waits a second, not fifteen.
	testOnlyCancelWait time.Duration
	// testOnlyBeforeRelease, when set, runs first in every supervision's release (teardown.go):
	// a test holds the release there.
	testOnlyBeforeRelease func()
	// testOnlySettling, when set, runs when a dispatch that found no free uid is about to
	// wait for the background releases (teardown.go).
	testOnlySettling func()
	// testOnlyHostname, when set, is the host name this Dispatcher's home identity on
	// Kubernetes was computed with by an older agora (k8sHomes): a test plays two hosts.
	testOnlyHostname string
}

func (d *Dispatcher) log() *slog.Logger {
	if d.Log != nil {
		return d.Log
	}
	return slog.Default()
}

func (d *Dispatcher) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

// providerFor returns the provider of the named target: LocalProvider for a local one, RemoteProviders'
// answer for the others.
func (d *Dispatcher) providerFor(ctx context.Context, name string) (compute.Provider, error) {
	t, err := d.Config.Target(name)
	if err != nil {
		return nil, err
	}
	if t.Provider == "" || t.Provider == config.ProviderLocal {
		return d.LocalProvider, nil
	}
	if d.RemoteProviders == nil {
		return nil, fmt.Errorf("target %q uses provider %s, which this process cannot start", name, t.Provider)
	}
	p, err := d.RemoteProviders(ctx, name, t)
	if err != nil {
		return nil, fmt.Errorf("target %q (provider %s): %w", name, t.Provider, err)
	}
	return p, nil
}
