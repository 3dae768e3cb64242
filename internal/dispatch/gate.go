package dispatch

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/sandboxfs"
	"github.com/agora-dev/agora/internal/secret/redact"
	"github.com/agora-dev/agora/internal/verdict"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// The verify gate (docs/plan.md, "Verify gates"): after the agent's sandbox has ended and its
// patch is stored, the supervisor builds a fresh tree (the base checkout plus the stored
// patch, host side, with git's own checks), refuses a patch touching a protected path, or a
// path its changes do not admit, before anything runs, then runs the gate's command in a NEW
// sandbox of the same target: no model key, no gateway, no secrets, no network, none of the
// agent's files but its patch, and none of its processes (its sandbox was torn down and
// reaped before). The verdict is the host's own observation of that sandbox: the process's
// exit status and its stdout and stderr read from the pipe, redacted with the dispatch's
// secret values, the last 16 KiB kept and hashed; with expect, also the JUnit report the
// command left in a report directory agora made for it, read once every process is gone.

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
	e := s.Effective().Clone()
	e.Timeout = min(e.Timeout, t.Timeout)
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
		o.State, o.Reason = lifecycle.DispatchFailed, lifecycle.ReasonVerifyFailed
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
			fl := failed(lifecycle.ReasonProviderFailed, "verify: read the stored patch: %v", err)
			return nil, &fl
		}
		patch = b
	}
	stack, err := d.stackPatches(r.Inputs)
	if err != nil {
		fl := failed(lifecycle.ReasonIntegrityFailed, "verify: the stacked base: %v", err)
		return nil, &fl
	}
	tree, err := buildGateTree(ctx, r, st, patch, stack)
	var ce *StackConflictError
	var me *stackMismatchError
	var re *stackReadError
	if errors.As(err, &ce) || errors.As(err, &me) || errors.As(err, &re) {
		// The base accept recorded does not build again: not the tree the agent worked on.
		fl := failed(lifecycle.ReasonIntegrityFailed, "verify: %v", err)
		return nil, &fl
	}
	if err != nil {
		if full := st.cloneExceeded(err, r.Target); full != "" {
			fl := failed(lifecycle.ReasonLimitExceeded, "verify: %s while checking out the base tree", full)
			return nil, &fl
		}
		fl := failed(lifecycle.ReasonProviderFailed, "verify: %v", err)
		return nil, &fl
	}
	if tree.applyErr != "" {
		v := verdict.Red(verdict.ReasonPatch, red.String("the patch does not apply to the base tree: "+tree.applyErr)+"; the command did not run",
			-1, spec.Command, 0, verdict.TailText{})
		return &v, nil
	}
	if hits, err := protectedPaths(spec.Protect, tree.touched); err != nil {
		fl := failed(lifecycle.ReasonProviderFailed, "verify: %v", err)
		return nil, &fl
	} else if len(hits) > 0 && !weakenProtect {
		for i := range hits {
			hits[i] = red.String(hits[i])
		}
		v := verdict.Protected(spec.Command, hits)
		return &v, nil
	}
	if len(spec.Changes) > 0 {
		off, err := admit(ctx, spec, tree)
		if err != nil {
			fl := failed(lifecycle.ReasonProviderFailed, "verify: %v", err)
			return nil, &fl
		}
		if len(off) > 0 {
			for i := range off {
				off[i].Path, off[i].Why = red.String(off[i].Path), red.String(off[i].Why)
			}
			v := verdict.OutsideChanges(spec.Command, spec.Changes, off)
			return &v, nil
		}
	}
	if err := tree.checkout(ctx); err != nil {
		if full := st.diskExceeded(r.Target); full != "" {
			fl := failed(lifecycle.ReasonLimitExceeded, "verify: %s while applying the patch", full)
			return nil, &fl
		}
		fl := failed(lifecycle.ReasonProviderFailed, "verify: %v", err)
		return nil, &fl
	}
	if err := st.handOver(tree.dir); err != nil {
		fl := failed(lifecycle.ReasonProviderFailed, "verify: %v", err)
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
	report := ""
	if spec.Expect != nil {
		var err error
		if report, err = st.reportDir(); err != nil {
			stdout.Close()
			stderr.Close()
			fl := failed(lifecycle.ReasonProviderFailed, "verify: %v", err)
			return nil, &fl
		}
		s.Binds = append(s.Binds, compute.Bind{Src: report, Dst: verdict.ReportPath, Writable: true, Result: true})
		s.Env = append(s.Env, "AGORA_REPORT="+verdict.ReportPath)
	}
	if target.VerifyCache != "" {
		b, err := verifyCacheBind(target.VerifyCache, filepath.Dir(filepath.Clean(d.StateDir)))
		if err != nil {
			stdout.Close()
			stderr.Close()
			fl := failed(lifecycle.ReasonProviderFailed, "verify: the target's %v", err)
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
		fl := failed(lifecycle.ReasonDenied, "verify: the dispatch has no sandbox, so its verify command would run on the host unconfined; not run")
		return nil, &fl
	}
	h, err := provider.Start(ctx, s)
	if err != nil {
		stdout.Close()
		stderr.Close()
		fl := failed(lifecycle.ReasonProviderFailed, "verify: start the verify sandbox: %v", err)
		return nil, &fl
	}
	if err := d.Records.SetProviderTask(context.WithoutCancel(ctx), r.ID, h.TaskID()); err != nil {
		provider.Cancel(context.WithoutCancel(ctx), h.TaskID())
		h.Wait()
		stdout.Close()
		stderr.Close()
		fl := failed(lifecycle.ReasonProviderFailed, "verify: %v", err)
		return nil, &fl
	}
	stop := d.watchCancel(ctx, provider, r.ID, h, nil)
	exit, werr := h.Wait()
	stop()
	stdout.Close()
	stderr.Close()
	switch {
	case werr != nil:
		fl := failed(lifecycle.ReasonProviderFailed, "verify: %v", werr)
		return nil, &fl
	case exit.Cancelled || d.Records.cancelRequested(context.WithoutCancel(ctx), r.ID):
		fl := Outcome{State: lifecycle.DispatchCancelled, Reason: lifecycle.ReasonCancelled, Detail: "cancelled during its verify gate"}
		return nil, &fl
	case exit.Lost:
		fl := failed(lifecycle.ReasonProviderFailed, "verify: the verify sandbox vanished before it ended (its container was removed)")
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
	if spec.Expect != nil && !exit.TimedOut {
		// Every process of the sandbox is gone (Wait's contract): the report is final.
		ev, why := readEvidence(report, *spec.Expect)
		v.Evidence = ev
		if why == "" && ev != nil {
			why = ev.Judge(spec.Expect.Min())
		}
		if v.Passed && why != "" {
			v = verdict.Red(verdict.ReasonEvidence, red.String(why), 0, spec.Command, took, text)
			v.Evidence = ev
		}
	}
	v.Cache = target.VerifyCache
	return &v, nil
}

// reportName is the gate's report directory in the stage, beside its tree.
const reportName = "verify-report"

// reportDir makes the gate's report directory: new and empty (whatever was there is
// removed), outside the tree the patch fills, handed to the sandbox uid, so nothing the patch
// ships or the agent left can be in it before the command runs.
func (s *stage) reportDir() (string, error) {
	dir := filepath.Join(filepath.Dir(s.workspace), reportName)
	if err := os.RemoveAll(dir); err != nil {
		return "", fmt.Errorf("clear the report directory: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", fmt.Errorf("make the report directory: %w", err)
	}
	if err := s.handOver(dir); err != nil {
		return "", err
	}
	return dir, nil
}

// readEvidence reads the gate's JUnit report through sandboxfs (no symlink, a regular file
// with one link, at most verdict.MaxReport bytes) and parses it: the evidence, or why there
// is none.
func readEvidence(dir string, e verdict.Expect) (*verdict.Evidence, string) {
	where := verdict.ReportPath + "/" + e.JUnit
	d, err := sandboxfs.Open(dir)
	if err != nil {
		return nil, "the command exited 0 but its report directory cannot be opened: " + err.Error()
	}
	defer d.Close()
	b, err := d.ReadFile(e.JUnit, verdict.MaxReport)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Sprintf("the command exited 0 but wrote no %s: its tests did not run to their end", where)
	case err != nil:
		return nil, fmt.Sprintf("the command exited 0 but its report %s cannot be read: %v", where, err)
	}
	ev, err := verdict.ParseJUnit(e.JUnit, b)
	if err != nil {
		return nil, fmt.Sprintf("the command exited 0 but its report %s is not JUnit XML agora reads: %v", where, err)
	}
	return &ev, ""
}

// admit is the gate's changes check on the patched tree: the touched paths its changes do not
// admit (verdict.Admit), with the tree's symbolic links read only when the patch leaves one.
func admit(ctx context.Context, spec verdict.Spec, tree *gateTree) ([]verdict.Offence, error) {
	changes, err := verdict.NewMatcher(spec.Changes)
	if err != nil {
		return nil, err
	}
	var protect *verdict.Matcher
	if len(spec.Protect) > 0 {
		if protect, err = verdict.NewMatcher(spec.Protect); err != nil {
			return nil, err
		}
	}
	var links verdict.Links
	if tree.hasNewLink() {
		if links, err = tree.links(ctx); err != nil {
			return nil, err
		}
	}
	return verdict.Admit(changes, protect, tree.changes, links), nil
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
