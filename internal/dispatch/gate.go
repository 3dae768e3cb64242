package dispatch

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/secret/redact"
	"github.com/agora-dev/agora/internal/verdict"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// The verify gate (docs/plan.md, "Verify gates"): after the agent's sandbox has ended and its
// patch is stored, the supervisor builds a fresh tree (the base checkout plus the stored
// patch, host side, with git's own checks), refuses a patch touching a protected path before
// anything runs, then runs the gate's command in a NEW sandbox of the same target: no model
// key, no gateway, no secrets, no network, none of the agent's files but its patch, and none
// of its processes (its sandbox was torn down and reaped before). The verdict is the host's
// own observation of that sandbox: the process's exit status and its stdout and stderr read
// from the pipe, redacted with the dispatch's secret values, the last 16 KiB kept and hashed.

// PhaseVerify is the host-side phase of a dispatch's verify gate, after capture.
const PhaseVerify = "verify"

// defaultVerifyPath is the verify sandbox's PATH after the target's verify_path.
const defaultVerifyPath = "/usr/local/bin:/usr/bin:/bin"

// checkVerify checks a request's verify gate against its target and returns the spec the
// record keeps (its timeout resolved), or nil for none.
func checkVerify(s *verdict.Spec, name string, t config.Target) (*verdict.Spec, error) {
	if s == nil {
		return nil, nil
	}
	if err := s.Validate(); err != nil {
		return nil, &RequestError{Err: err}
	}
	if t.Provider == config.ProviderKubernetes {
		return nil, reqErr("target %q runs dispatches as Kubernetes pods, which run only agora's worker, so a verify gate cannot run there: verify on a local or docker target", name)
	}
	if t.Sandbox == compute.SandboxNone {
		// The command is judged against no grant because its sandbox leaves it nothing to
		// misuse; without one it would run on the host as agora, with the host's network
		// and files.
		return nil, reqErr("target %q has sandbox %q, so a verify command would run on the host unconfined: verify on a sandboxed target", name, compute.SandboxNone)
	}
	// The command runs in a sandbox of the target: no longer than anything else may there.
	if s.Timeout > t.Timeout {
		return nil, reqErr("verify timeout %s is over target %q's limit of %s", s.Timeout, name, t.Timeout)
	}
	e := s.Effective()
	e.Timeout = min(e.Timeout, t.Timeout)
	e.Command, e.Protect = slices.Clone(e.Command), slices.Clone(e.Protect)
	return &e, nil
}

// gate runs r's verify gate on the finished outcome o and returns the outcome to record:
// finished with a green verdict, failed/verify-failed with a red one (the patch and outputs
// kept), or the host's own failure (provider-failed, cancelled) without a verdict.
func (d *Dispatcher) gate(ctx context.Context, r *Record, st *stage, provider compute.Provider, target config.Target,
	o Outcome, red *redact.Redactor, enter func(string)) Outcome {
	enter(PhaseVerify)
	v, fl := d.runGate(ctx, r, st, provider, target, o.Result, red)
	if fl != nil {
		fl.Isolation, fl.Result, fl.Net, fl.Usage, fl.ExitCode = o.Isolation, o.Result, o.Net, o.Usage, o.ExitCode
		return *fl
	}
	o.Verdict = v
	if !v.Passed {
		o.State, o.Reason = StateFailed, ReasonVerifyFailed
		o.Detail = "verify " + v.Summary()
	}
	return o
}

// runGate builds the gate's tree and runs its command; a non-nil Outcome is the host's own
// failure, which no verdict stands for.
func (d *Dispatcher) runGate(ctx context.Context, r *Record, st *stage, provider compute.Provider, target config.Target,
	res *Result, red *redact.Redactor) (*verdict.Verdict, *Outcome) {
	spec := r.Verify.Effective()
	// The agent's tree is read and stored: free its room on the quota for the fresh one.
	st.removeAgentTree()
	var patch []byte
	if res != nil && res.Patch != nil {
		b, err := d.Blobs.Get(res.Patch.Digest, wire.MaxPatchSize)
		if err != nil {
			fl := failed(ReasonProviderFailed, "verify: read the stored patch: %v", err)
			return nil, &fl
		}
		patch = b
	}
	stack, err := d.stackPatches(r.Inputs)
	if err != nil {
		fl := failed(ReasonIntegrityFailed, "verify: the stacked base: %v", err)
		return nil, &fl
	}
	tree, err := buildGateTree(ctx, r, st, patch, stack)
	var ce *StackConflictError
	var me *stackMismatchError
	if errors.As(err, &ce) || errors.As(err, &me) {
		// The base accept recorded does not build again: not the tree the agent worked on.
		fl := failed(ReasonIntegrityFailed, "verify: %v", err)
		return nil, &fl
	}
	if err != nil {
		if full := st.cloneExceeded(err, r.Target); full != "" {
			fl := failed(ReasonLimitExceeded, "verify: %s while checking out the base tree", full)
			return nil, &fl
		}
		fl := failed(ReasonProviderFailed, "verify: %v", err)
		return nil, &fl
	}
	if tree.applyErr != "" {
		v := verdict.Red(verdict.ReasonPatch, red.String("the patch does not apply to the base tree: "+tree.applyErr)+"; the command did not run",
			-1, spec.Command, 0, verdict.TailText{})
		return &v, nil
	}
	if hits, err := protectedPaths(spec.Protect, tree.touched); err != nil {
		fl := failed(ReasonProviderFailed, "verify: %v", err)
		return nil, &fl
	} else if len(hits) > 0 {
		for i := range hits {
			hits[i] = red.String(hits[i])
		}
		v := verdict.Protected(spec.Command, hits)
		return &v, nil
	}
	if err := tree.checkout(ctx); err != nil {
		if full := st.diskExceeded(r.Target); full != "" {
			fl := failed(ReasonLimitExceeded, "verify: %s while applying the patch", full)
			return nil, &fl
		}
		fl := failed(ReasonProviderFailed, "verify: %v", err)
		return nil, &fl
	}
	if err := st.handOver(tree.dir); err != nil {
		fl := failed(ReasonProviderFailed, "verify: %v", err)
		return nil, &fl
	}
	return d.runGateCommand(ctx, r, st, provider, target, spec, tree.dir, red)
}

// runGateCommand runs the gate's command in a fresh sandbox on dir and reads its verdict.
func (d *Dispatcher) runGateCommand(ctx context.Context, r *Record, st *stage, provider compute.Provider, target config.Target,
	spec verdict.Spec, dir string, red *redact.Redactor) (*verdict.Verdict, *Outcome) {
	var tail verdict.Tail
	// One redactor per stream, so a secret split across two writes of one stream is still
	// seen whole; the tail interleaves them as a terminal would.
	locked := &lockedWriter{w: &tail}
	stdout, stderr := red.Writer(locked), red.Writer(locked)
	path := strings.Join(append(slices.Clone(target.VerifyPath), defaultVerifyPath), ":")
	s := compute.Spec{
		ID:   r.ID,
		Argv: spec.Command,
		// Nothing of the env bundles, no secret, no model route: only what a command needs.
		Env:     []string{"PATH=" + path, "HOME=/tmp", "TMPDIR=/tmp", "LANG=C.UTF-8"},
		Dir:     wire.WorkspacePath,
		Sandbox: r.Sandbox,
		Limits: compute.Limits{
			Timeout: spec.Timeout, MaxProcs: target.MaxProcs, FileSize: int64(target.FileSize), Memory: int64(target.Memory),
			Scratch: int64(target.Disk), Disk: int64(target.Disk),
		},
		Stdout: stdout, Stderr: stderr,
		RunAs: st.owner,
		Binds: []compute.Bind{{Src: dir, Dst: wire.WorkspacePath, Writable: true}},
	}
	if target.VerifyCache != "" {
		b, err := verifyCacheBind(target.VerifyCache, filepath.Dir(filepath.Clean(d.StateDir)))
		if err != nil {
			stdout.Close()
			stderr.Close()
			fl := failed(ReasonProviderFailed, "verify: the target's %v", err)
			return nil, &fl
		}
		s.Binds = append(s.Binds, b)
		s.Env = append(s.Env, "XDG_CACHE_HOME="+verifyCachePath)
	}
	if r.Sandbox == compute.SandboxNone {
		// Refused at accept; a record accepted before that rule must not run it either: the
		// command would run on the host as agora, with its network and files.
		stdout.Close()
		stderr.Close()
		fl := failed(ReasonDenied, "verify: the dispatch has no sandbox, so its verify command would run on the host unconfined; not run")
		return nil, &fl
	}
	h, err := provider.Start(ctx, s)
	if err != nil {
		stdout.Close()
		stderr.Close()
		fl := failed(ReasonProviderFailed, "verify: start the verify sandbox: %v", err)
		return nil, &fl
	}
	if err := d.Records.SetProviderTask(context.WithoutCancel(ctx), r.ID, h.TaskID()); err != nil {
		provider.Cancel(context.WithoutCancel(ctx), h.TaskID())
		h.Wait()
		stdout.Close()
		stderr.Close()
		fl := failed(ReasonProviderFailed, "verify: %v", err)
		return nil, &fl
	}
	stop := d.watchCancel(ctx, provider, r.ID, h, nil)
	exit, werr := h.Wait()
	stop()
	stdout.Close()
	stderr.Close()
	switch {
	case werr != nil:
		fl := failed(ReasonProviderFailed, "verify: %v", werr)
		return nil, &fl
	case exit.Cancelled || d.Records.cancelRequested(context.WithoutCancel(ctx), r.ID):
		fl := Outcome{State: StateCancelled, Reason: ReasonCancelled, Detail: "cancelled during its verify gate"}
		return nil, &fl
	case exit.Lost:
		fl := failed(ReasonProviderFailed, "verify: the verify sandbox vanished before it ended (its container was removed)")
		return nil, &fl
	}
	took, text := exit.Duration, tail.Text()
	var v verdict.Verdict
	switch {
	case exit.TimedOut:
		v = verdict.Red(verdict.ReasonTimeout, fmt.Sprintf("killed after %s", spec.Timeout), -1, spec.Command, took, text)
	case exit.Code != 0:
		detail := fmt.Sprintf("exit status %d", exit.Code)
		if exit.Signal != "" {
			detail = "killed (" + exit.Signal + ")"
		}
		if full := st.diskExceeded(r.Target); full != "" {
			detail += "; " + full
		}
		v = verdict.Red(verdict.ReasonExit, detail, exit.Code, spec.Command, took, text)
	default:
		v = verdict.Green(spec.Command, took, text)
	}
	v.Cache = target.VerifyCache
	return &v, nil
}

// protectedPaths are the touched paths a protect glob matches, sorted.
func protectedPaths(globs, touched []string) ([]string, error) {
	if len(globs) == 0 {
		return nil, nil
	}
	m, err := verdict.NewMatcher(globs)
	if err != nil {
		return nil, err
	}
	var hits []string
	for _, p := range touched {
		if _, ok := m.Match(p); ok {
			hits = append(hits, p)
		}
	}
	slices.Sort(hits)
	return slices.Compact(hits), nil
}

// lockedWriter serialises the two streams' writes into one writer.
type lockedWriter struct {
	mu sync.Mutex
	w  interface{ Write([]byte) (int, error) }
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// gateTimeout bounds the host's git steps that build the gate's tree.
const gateTimeout = 5 * time.Minute
