package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/runtime/agentrun"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// Limits of what the worker reads from the bundle.
const (
	maxSubagentDocSize = 1 << 20
	maxArchiveSize     = 1 << 30
	maxSecretsSize     = 1 << 20
)

// options configure one run of the worker. Tests point Root at a temporary directory laid
// out like the sandbox and run the worker without one.
type options struct {
	// Root is the layout root (DefaultRoot in the sandbox).
	Root string
	// SecretsFile is the secrets object. When nil and the manifest names secret keys, the
	// worker opens descriptor secretsFD (Main: [wire.SecretsFD]). The worker closes it.
	SecretsFile *os.File
	// TempDir is private scratch space: the baseline git directory and HOME ("/tmp" in
	// the sandbox).
	TempDir string
	// Stdout and Stderr receive the agent's output; setup scripts write both their streams
	// to Stderr. nil discards.
	Stdout, Stderr io.Writer

	secretsFD int
	// agentrun.DialHost connects to a host socket by name through the network gateway (remote mode).
	dialHost         func(ctx context.Context, socket string) (net.Conn, error)
	testOnlyMaxPatch int64 // 0: MaxPatchSize
	// stopOthers lets the worker kill every other process of its PID namespace after the
	// agent (with Manifest.PIDNamespace). Only Main sets it, and only inside a sandbox:
	// a test running the worker in its own process must never kill(-1).
	stopOthers bool
	// testOnlyStopped lets a test that runs the worker in its own process (no stop step)
	// see what it does once the stop step left no process of the agent.
	testOnlyStopped bool
	// awaitSignals returns once the worker drops the signals it must survive (Main's
	// dropSignals, beside verify); the steps after verify call it first, so no process but
	// the worker runs before. nil: nothing to wait for.
	awaitSignals func()
}

// Main runs the worker in the sandbox layout at [wire.DefaultRoot], with the secrets on
// [wire.SecretsFD]. It returns the process exit code: 0 when result.json was written, whatever
// the dispatch's status, and 1 when even that was impossible.
//
// A target with `sandbox: none` has no mount namespace to put the layout at /agora; the host
// then names the stage directory in AGORA_WORKER_ROOT (same layout below it) and the worker
// keeps its scratch space in a private tmp/ there, not in the host's shared /tmp.
func Main(ctx context.Context, stdout, stderr io.Writer) int {
	// First of all: nothing running as our uid may attach to us (ptrace, /proc/PID/mem,
	// process_vm_writev, pidfd_getfd). The agent shares the uid; without this it could
	// rewrite the worker's memory and with it result.json's hashes. The agent's
	// own programs become dumpable again at exec; that is theirs.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		fmt.Fprintf(stderr, "agora worker: make the worker non-dumpable: %v\n", err)
		return 1
	}
	// As the sandbox's init the kernel spares the worker any signal from inside that it has
	// no handler for, but the Go runtime installs handlers for all, and exits on most: an
	// agent's `kill -TERM 1` would end the worker mid-run. The host never signals it but
	// with SIGKILL (or cgroup.kill), so the worker drops every signal in ignoredSignals.
	// SIGCHLD (exec's waits) and SIGURG (the scheduler's preemption) keep their handlers.
	// The runtime hands a fault signal (ILL, TRAP, STKFLT, SYS) to Notify only when a
	// process sent it (kill, tgkill), so those are dropped too while a real fault (a bad
	// instruction, seccomp's SIGSYS) still crashes the worker. What still ends it, and fails
	// only the agent's own dispatch with nothing kept (which exiting would do anyway): SEGV,
	// BUS and FPE sent by kill, and any fault signal sent by sigqueue, which the runtime
	// takes for a real fault (TestDropSignals_WhatEndsTheWorker pins each).
	// Caught and dropped, not ignored: an ignored signal stays ignored across exec, so the
	// agent and everything it starts would inherit SIGTERM, SIGINT, SIGHUP and SIGPIPE
	// ignored (a `timeout`, a CLI's SIGTERM to its tool's process, `cmd | head` would not end
	// them); a caught one is the default again in every program the worker starts.
	// Each signal's catch is a round trip with the runtime's signal-mask thread (0.5-1 ms
	// for all of them), so it goes on beside verify: nothing but the worker runs in the
	// sandbox before steps waits for it (awaitSignals), after verify.
	dropped := make(chan struct{})
	go func() { dropSignals(); close(dropped) }()
	if err := watchLifeline(stderr, os.Exit); err != nil {
		fmt.Fprintf(stderr, "agora worker: %v\n", err)
		return 1
	}
	// Started ahead in a warm slot: nothing below runs before the dispatch's claim.
	if err := waitForClaim(); err != nil {
		fmt.Fprintf(stderr, "agora worker: %v\n", err)
		return 1
	}
	root, tmp := wire.DefaultRoot, "/tmp"
	if r := os.Getenv(wire.RootEnv); r != "" {
		root, tmp = r, filepath.Join(r, "tmp")
		if err := os.MkdirAll(tmp, 0o700); err != nil {
			fmt.Fprintf(stderr, "agora worker: %v\n", err)
			return 1
		}
	}
	opts := options{Root: root, TempDir: tmp, Stdout: stdout, Stderr: stderr, secretsFD: wire.SecretsFD,
		stopOthers: os.Getenv(wire.RootEnv) == "", awaitSignals: func() { <-dropped }}
	if remoteMode() {
		return runRemote(ctx, opts)
	}
	return run(ctx, opts)
}

// dropSignals catches ignoredSignals and drops them, for the life of the process.
func dropSignals() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, ignoredSignals...)
	go func() {
		for range c {
		}
	}()
}

// ignoredSignals are every signal a process may catch whose default or Go-runtime action
// would end or stop the worker. Not SIGPROF: the runtime keeps it for its profiler
// (Notify and Ignore leave it alone) and a SIGPROF sent by kill ends no Go program.
var ignoredSignals = []os.Signal{
	unix.SIGHUP, unix.SIGINT, unix.SIGQUIT, unix.SIGILL, unix.SIGTRAP, unix.SIGABRT, unix.SIGUSR1,
	unix.SIGUSR2, unix.SIGPIPE, unix.SIGALRM, unix.SIGTERM, unix.SIGSTKFLT, unix.SIGTSTP,
	unix.SIGTTIN, unix.SIGTTOU, unix.SIGXCPU, unix.SIGXFSZ, unix.SIGVTALRM,
	unix.SIGIO, unix.SIGPWR, unix.SIGSYS,
}

// failure is why the worker stopped or why the dispatch failed.
type failure struct {
	reason wire.Reason
	detail string
}

func fail(reason wire.Reason, format string, args ...any) *failure {
	return &failure{reason: reason, detail: fmt.Sprintf(format, args...)}
}

// runner holds one run's state; the phases fill it in order.
type runner struct {
	opts      options
	workspace string
	out       string
	res       wire.Result

	man  wire.Manifest
	doc  catalog.SubagentDoc
	caps []capability
	// overlaid are the workspace paths the overlay wrote, left out of the patch.
	overlaid []string
	secrets  map[string]string
	env      []string
	rt       agentrun.Adapter
	// agentrun.MCPConfig is the capabilities' MCP config (claude-code), nil when none declares one.
	mcpConfig []byte
	// gateway is the gateway's socket (model runtimes), checked at verify.
	gateway string
	// agentrun.WorkerKey is the key the worker claimed the gateway with (learn: workerkey.go).
	workerKey string
	// proxy relays the agent's loopback proxy port to the host's egress proxy (network: proxy).
	proxy *proxyRelay
	git   *gitDir
	exit  agentrun.Exit
	// transcript is the model runtimes' transcript, written to out/ after stop.
	transcript *agentrun.Transcript
	// answerSealed: the runtime's final answer reaches the worker over a channel no process
	// of the agent can write (answer.go); answerWhy says why not when it does not.
	answerSealed bool
	answerWhy    string
	// stopped: the stop step killed every other process of the sandbox.
	stopped bool
}

func run(ctx context.Context, opts options) int {
	opts.TempDir = cmp.Or(opts.TempDir, os.TempDir())
	opts.Stdout = cmp.Or(opts.Stdout, io.Discard)
	opts.Stderr = cmp.Or(opts.Stderr, io.Discard)
	r := &runner{
		opts:      opts,
		workspace: filepath.Join(opts.Root, wire.WorkspaceDir),
		out:       filepath.Join(opts.Root, wire.OutDir),
		res:       wire.Result{Version: wire.ResultVersion, Status: wire.StatusOK},
	}
	defer r.closeSecretsFile()
	defer r.cleanup()
	// Nothing in out/ speaks for this run until the worker writes it.
	r.removeOwnFiles()

	r.steps(ctx)

	if err := r.writeResult(); err != nil {
		fmt.Fprintf(opts.Stderr, "agora worker: error: %v\n", err)
		return 1
	}
	return 0
}

// steps runs the phases. Up to the baseline a failure stops the run; from the runtime on,
// every phase runs, so a failed or questioning agent still leaves its patch and outputs.
func (r *runner) steps(ctx context.Context) {
	if !r.phase(ctx, wire.PhaseVerify, r.verify) {
		return
	}
	// Verify reads files only; the steps after it may start processes in the sandbox (a
	// setup script, git, the agent), which could signal the worker.
	if r.opts.awaitSignals != nil {
		r.opts.awaitSignals()
	}
	for _, p := range []struct {
		name string
		f    func(context.Context) *failure
	}{
		{wire.PhaseSecrets, r.readSecrets},
		{wire.PhaseNetwork, r.network},
		{wire.PhaseOverlay, r.overlay},
		{wire.PhaseSetup, r.setup},
		{wire.PhaseBaseline, r.baselineAndBase},
	} {
		if !r.phase(ctx, p.name, p.f) {
			return
		}
	}
	r.phase(ctx, wire.PhaseRuntime, r.runAgent)
	// The network ends with the agent: nothing after it is the agent's.
	r.proxy.close()
	// Nothing the agent started may run while the worker captures: a process left behind
	// could swap what is hashed. Without that guarantee nothing is captured.
	if !r.phase(ctx, wire.PhaseStop, r.stop) {
		return
	}
	// The agent may have taken the worker's write bits on out/ (it runs as the same user).
	if fl := r.reclaimOut(); fl != nil {
		r.record(fl)
	}
	// The agent shares out/: whatever it left under the worker's names is not the worker's.
	r.removeOwnFiles()
	if r.modelRuntime() {
		// A model runtime's question, like its answer, is the model's, which keepAnswer
		// writes: a needs_input.json the agent left (the code a reviewer ran) would turn the
		// model's answer into a question of its own, put to a person as the model's.
		_ = os.RemoveAll(filepath.Join(r.out, wire.NeedsInputFile))
	}
	r.stopped = r.stopped || r.opts.testOnlyStopped
	// An in-process runtime's answer and question are written only now, when nothing of the
	// agent runs that could replace them before they are read back and hashed.
	if fl := r.keepAnswer(r.exit); fl != nil {
		r.record(fl)
	}
	if fl := r.keepTranscript(); fl != nil {
		r.record(fl)
	}
	if ctx.Err() != nil {
		r.record(fail(lifecycle.ReasonWorkerFailed, "worker cancelled"))
		return
	}
	if !r.exit.TimedOut {
		r.phase(ctx, wire.PhaseNeedsInput, r.needsInput)
	}
	r.phase(ctx, wire.PhaseCapture, r.capture)
	r.phase(ctx, wire.PhaseOutputs, r.outputs)
}

// phase runs f, records it with its duration, and reports whether it succeeded.
func (r *runner) phase(ctx context.Context, name string, f func(context.Context) *failure) bool {
	start := time.Now()
	fl := f(ctx)
	r.res.Phases = append(r.res.Phases, wire.Phase{Name: name, OK: fl == nil, MS: time.Since(start).Milliseconds()})
	if fl != nil {
		r.record(fl)
		return false
	}
	return true
}

// record makes the result failed. The first failure gives the reason; later ones only add
// to the detail.
func (r *runner) record(fl *failure) {
	if r.res.Status != wire.StatusFailed {
		r.res.Status = wire.StatusFailed
		r.res.Reason = fl.reason
		r.res.NeedsInput = nil
		r.res.Detail = fl.detail
	} else {
		r.res.Detail += "; " + fl.detail
	}
	r.res.Detail = agentrun.Truncate(r.res.Detail, wire.MaxDetail)
}

// removeOwnFiles deletes result.json and patch.diff from out/, whatever they are.
func (r *runner) removeOwnFiles() {
	for _, name := range []string{wire.ResultFile, wire.PatchFile} {
		_ = os.RemoveAll(filepath.Join(r.out, name))
	}
}

func (r *runner) writeResult() error {
	b, err := r.res.Marshal()
	if err != nil {
		// A result the worker cannot marshal is a bug; still say so in a valid result.
		r.res = wire.Result{Version: wire.ResultVersion, Status: wire.StatusFailed, Reason: lifecycle.ReasonWorkerFailed,
			Detail: agentrun.Truncate("write result: "+err.Error(), wire.MaxDetail), Phases: r.res.Phases}
		if b, err = r.res.Marshal(); err != nil {
			return fmt.Errorf("write result: %w", err)
		}
	}
	return writeFileAtomic(r.out, wire.ResultFile, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

// writeFileAtomic writes dir/name through a fresh temporary file in dir and a rename, so a
// reader never sees a partial file and a symlink planted at name is replaced, not followed.
// There is no fsync: the host reads the file after the worker exits, on the same machine,
// and a crash in between loses the dispatch anyway.
func writeFileAtomic(dir, name string, write func(io.Writer) error) error {
	f, err := os.CreateTemp(dir, "."+name+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err := write(f); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := f.Chmod(0o644); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	dst := filepath.Join(dir, name)
	if err := os.Rename(tmp, dst); err != nil {
		// A directory in the way (planted by the agent) cannot be renamed over.
		if rmErr := os.RemoveAll(dst); rmErr != nil {
			return fmt.Errorf("write %s: %w", name, errors.Join(err, rmErr))
		}
		if err := os.Rename(tmp, dst); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	ok = true
	return nil
}

func (r *runner) cleanup() {
	r.proxy.close()
	if r.git != nil {
		r.git.remove()
	}
}
