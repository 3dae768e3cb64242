package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/egress/proxy"
	"github.com/agora-dev/agora/internal/secret/redact"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// Progress receives lifecycle events as they are recorded (kind is a state), and each
// host-side phase as it begins (kind is a Phase constant, r the record as accepted).
type Progress func(kind string, r *Record)

// Supervise runs an accepted dispatch to its terminal state: it stages the bundle, starts the
// worker, records started, waits, and reconciles. It returns the final record. Whatever goes
// wrong after the record exists ends in a recorded terminal state, never in a silent return.
func (d *Dispatcher) Supervise(ctx context.Context, id string, progress Progress) (*Record, error) {
	if progress == nil {
		progress = func(string, *Record) {}
	}
	r, err := d.Records.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if r.State != StateAccepted {
		return r, nil
	}
	if err := d.Records.Claim(ctx, id); err != nil {
		if errors.Is(err, ErrClaimed) {
			// Someone else runs it (or it already started): report the record as it is.
			return d.Records.Get(ctx, id)
		}
		return nil, err
	}
	sp := d.startDispatchSpan(ctx, r)
	outcome, err := d.run(ctx, r, progress, sp)
	if err != nil {
		outcome = Outcome{State: StateFailed, Reason: ReasonProviderFailed, Detail: err.Error()}
	}
	// Record the end even when ctx was cancelled: the record must not stay live.
	finishCtx := context.WithoutCancel(ctx)
	if _, err := d.Records.Finish(finishCtx, id, outcome); err != nil {
		return nil, err
	}
	final, err := d.Records.Get(finishCtx, id)
	if err != nil {
		return nil, err
	}
	sp.finish(final)
	progress(final.State, final)
	return final, nil
}

func failed(reason, format string, args ...any) Outcome {
	return Outcome{State: StateFailed, Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

func (d *Dispatcher) run(ctx context.Context, r *Record, progress Progress, sp *dispatchSpan) (Outcome, error) {
	target, err := d.Config.Target(r.Target)
	if err != nil {
		return failed(ReasonProviderFailed, "%v", err), nil
	}
	provider, err := d.providerFor(ctx, r.Target)
	if err != nil {
		return failed(ReasonProviderFailed, "%v", err), nil
	}
	p, err := d.loadPinned(ctx, r)
	if err != nil {
		return failed(ReasonIntegrityFailed, "load pinned catalog content: %v", err), nil
	}
	limits := limitsFor(target, r.Sandbox, r.ID)
	if d.testOnlyInvokingUser {
		limits.owner, limits.disk = nil, 0
	}
	if limits.owner != nil {
		// Held until the stage's work is gone (deferred before removeWork, so released after).
		lease, err := leaseUID(d.StateDir, target.SandboxUID, r.ID)
		if err != nil {
			return failed(ReasonProviderFailed, "%v", err), nil
		}
		defer lease.release()
		limits.owner = &compute.HostUser{UID: lease.uid, GID: lease.uid}
	}
	st, err := newStage(d.StateDir, r.ID, limits)
	if err != nil {
		return Outcome{}, err
	}
	// After collection (reconcile reads the out directory first); it unmounts the disk quota.
	defer st.removeWork()
	sp.setCapabilities(p.doc.Capabilities)
	enter := func(phase string) { st.setPhase(phase); sp.phase(phaseSpan(phase)); progress(phase, r) }
	enter(PhaseStaging)
	if err := st.checkRunnable(d.AgoraBin); err != nil {
		return failed(ReasonProviderFailed, "%v", err), nil
	}

	// The model endpoint and key leave the plan before the bundle is written: the worker
	// never learns them; the gateway uses them.
	endpoint, err := d.takeModelEndpoint(ctx, p)
	if err != nil {
		return failed(ReasonFetchFailed, "%v", err), nil
	}

	// The host's agent CLI, resolved now (what runs is what is recorded), bound read-only.
	rb, fl := d.runtimeBinary(ctx, p.doc.Runtime, r.Sandbox)
	if fl != nil {
		return *fl, nil
	}
	if err := d.Records.SetRuntimeBinary(ctx, r.ID, rb); err != nil {
		return Outcome{}, err
	}
	r.RuntimeBinary, p.runtimeBinary = rb, rb

	timeout := time.Duration(r.Timeout)
	setupTimeout, agentTimeout := budgets(timeout)
	if err := d.writeBundle(r, p, st, agentTimeout, setupTimeout, target.ApprovalTimeout); err != nil {
		return Outcome{}, fmt.Errorf("stage bundle: %w", err)
	}
	if err := prepareWorkspace(ctx, r, st); err != nil {
		if full := st.cloneExceeded(err, r.Target); full != "" {
			// The clone counts against the quota too.
			return failed(ReasonLimitExceeded, "%s while cloning %s", full, r.Repo), nil
		}
		return failed(ReasonFetchFailed, "%v", err), nil
	}
	inputsDir := filepath.Join(st.dir, wire.InputsDir)
	if len(r.Inputs) > 0 {
		if err := d.stageInputs(r.Inputs, inputsDir); err != nil {
			return failed(ReasonIntegrityFailed, "stage inputs: %v", err), nil
		}
	}
	if err := d.stageCapabilityFiles(p, st.capabilityFilesDir()); err != nil {
		return failed(ReasonIntegrityFailed, "stage capability files: %v", err), nil
	}
	if err := st.handOver(st.bundle, st.workspace, st.out, inputsDir, st.capabilityFilesDir()); err != nil {
		return Outcome{}, err
	}

	secrets := map[string]string{}
	var values [][]byte
	if endpoint != nil && len(endpoint.key) > 0 {
		// Never in the sandbox, but masked in everything stored all the same.
		values = append(values, append([]byte(nil), endpoint.key...))
	}
	for k, ref := range p.secretRefs {
		v, err := d.Unseal(ctx, ref)
		if err != nil {
			return failed(ReasonFetchFailed, "unseal secret %s: %v", k, err), nil
		}
		secrets[k] = string(v)
		values = append(values, v)
	}
	// A bound secret's value stays on the host: the sandbox gets a placeholder the proxy swaps
	// back, for the bound hosts only. values keeps the value, so it is masked all the same.
	bindings, err := bindSecrets(secrets, p.bindings)
	if err != nil {
		return Outcome{}, err
	}
	red := redact.New(values)

	stdout, err := newLogSink(st.stdout, MaxStdout, red)
	if err != nil {
		return Outcome{}, err
	}
	stderr, err := newLogSink(st.stderr, MaxStderr, red)
	if err != nil {
		stdout.Close()
		return Outcome{}, err
	}

	// network: host is the explicit unsafe escape: every dispatch that takes it says so in its
	// own log, whichever door it came through (CLI, MCP, a plan), not only on a terminal.
	if r.Network == NetworkHost {
		stderr.notice("WARNING: this dispatch has the host's network, unrestricted and unaudited (target network: host)")
	}
	spec := compute.Spec{
		ID:      r.ID,
		Argv:    []string{wire.BinPath, "worker"},
		Env:     []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "LANG=C.UTF-8", "AGORA_DISPATCH_ID=" + r.ID},
		Dir:     wire.WorkspacePath,
		Network: r.Network == NetworkHost,
		Sandbox: r.Sandbox,
		Limits: compute.Limits{
			Timeout: timeout, MaxProcs: target.MaxProcs, FileSize: int64(target.FileSize), Memory: int64(target.Memory),
			// /tmp holds the baseline's copy of the workspace: as large as the disk quota.
			Scratch: int64(target.Disk),
			Disk:    int64(target.Disk),
		},
		Stdout: stdout, Stderr: stderr,
		// Root runs the sandbox as the target's sandbox uid; nil leaves it the invoking user.
		RunAs: st.owner,
		Binds: append(append([]compute.Bind{{Src: d.AgoraBin, Dst: wire.BinPath}}, st.bundleBinds(wire.BundlePath)...),
			compute.Bind{Src: st.workspace, Dst: wire.WorkspacePath, Writable: true},
			compute.Bind{Src: st.out, Dst: wire.OutPath, Writable: true, Result: true},
			compute.Bind{Src: st.capabilityFilesDir(), Dst: wire.CapabilityFilesPath},
		),
	}
	spec.Binds = append(spec.Binds, runtimeBinaryBind(rb)...)
	if len(r.Inputs) > 0 {
		spec.Binds = append(spec.Binds, compute.Bind{Src: inputsDir, Dst: wire.InputsPath})
	}
	// Host-side enforcers trip this to stop the sandbox and fail the dispatch limit-exceeded.
	trip := newLimitTrip()
	gw, fl, err := d.startNetwork(ctx, r, st, endpoint, values, bindings, trip, stderr, &spec, sp)
	defer gw.close()
	if fl != nil || err != nil {
		stdout.Close()
		stderr.Close()
		if fl != nil {
			return *fl, nil
		}
		return Outcome{}, err
	}
	if r.Sandbox == compute.SandboxNone {
		// No mount namespace: the worker finds its files at their host paths.
		spec.Argv = []string{d.AgoraBin, "worker"}
		spec.Binds = nil
		spec.Env = append(spec.Env, wire.RootEnv+"="+st.dir)
		spec.Dir = st.workspace
	}

	var secretsRead *os.File
	if len(secrets) > 0 {
		rd, wr, err := os.Pipe()
		if err != nil {
			return Outcome{}, err
		}
		secretsRead = rd
		spec.Files = []*os.File{rd}
		body, _ := json.Marshal(secrets)
		go func() {
			// The pipe holds at most 64 KiB; the worker reads it fully before anything else.
			wr.Write(body)
			wr.Close()
		}()
	}

	enter(PhaseSandbox)
	h, err := provider.Start(ctx, spec)
	if secretsRead != nil {
		secretsRead.Close()
	}
	if err != nil {
		stdout.Close()
		stderr.Close()
		return failed(ReasonProviderFailed, "%v", err), nil
	}
	if err := d.Records.Started(ctx, r.ID, h.TaskID(), selfSupervisor()); err != nil {
		provider.Cancel(context.WithoutCancel(ctx), h.TaskID())
		h.Wait()
		return Outcome{}, err
	}
	if started, err := d.Records.Get(ctx, r.ID); err == nil {
		progress(StateStarted, started)
	}
	enter(PhaseAgent)

	stopWatch := d.watchCancel(ctx, provider, r.ID, h, trip.C())
	exit, werr := h.Wait()
	stopWatch()
	enter(PhaseCapture)
	stdout.Close()
	stderr.Close()
	// Every request of the worker is answered and audited before the record is reconciled.
	// Its only error is a socket it could not remove, and its directory goes with it.
	_ = gw.close()
	exit.Isolation = st.isolation(exit.Isolation)
	if full := st.diskExceeded(r.Target); full != "" {
		// Found after the sandbox exited: the agent's writes stopped at the quota.
		trip.Trip(full)
	}

	sp.phase(SpanReconcile)
	o := d.reconcile(context.WithoutCancel(ctx), r, st, exit, werr, trip, red, stdout, stderr, endpoint != nil)
	o.Net, o.Usage = gw.netStats(), gw.usage()
	if r.Verify != nil && o.State == StateFinished {
		// The agent's sandbox has exited and been reaped, and its products are stored: the
		// gate runs on the stored patch alone, in a sandbox of its own.
		o = d.gate(ctx, r, st, provider, target, o, red, enter)
	}
	return o, nil
}

// startNetwork starts what the sandbox reaches the outside through, in one socket directory
// bound at /agora/gateway: the model gateway for a model runtime, the egress proxy for
// network: proxy (with its trust store). It returns a failed outcome for what the dispatch
// cannot run without, or an error for the host's own trouble.
func (d *Dispatcher) startNetwork(ctx context.Context, r *Record, st *stage, ep *modelEndpoint, values [][]byte,
	bindings []proxy.Binding, trip *limitTrip, stderr *logSink, spec *compute.Spec, sp *dispatchSpan) (*runningGateway, *Outcome, error) {
	if ep == nil && r.Network != NetworkProxy {
		return nil, nil, nil
	}
	gw, err := openGatewayDir(st)
	if err != nil {
		o := failed(ReasonProviderFailed, "%v", err)
		return nil, &o, nil
	}
	if ep != nil {
		if err := d.startGateway(ctx, r, gw, ep, values, trip, gatewayTracer(sp)); err != nil {
			o := failed(ReasonProviderFailed, "%v", err)
			return gw, &o, nil
		}
	}
	if r.Network == NetworkProxy {
		ns, err := d.prepareProxy(r, st, bindings)
		if err != nil {
			o := failed(ReasonProviderFailed, "egress proxy: %v", err)
			return gw, &o, nil
		}
		if err := d.startProxy(r, gw, ns, trip, stderr.notice); err != nil {
			o := failed(ReasonProviderFailed, "%v", err)
			return gw, &o, nil
		}
		spec.Binds = append(spec.Binds, ns.trustBinds()...)
		if ns.token != "" {
			spec.Env = append(spec.Env, wire.ProxyTokenEnv+"="+ns.token)
		}
	}
	// The sandbox user must be able to connect to the sockets.
	if err := st.handOver(gw.dir); err != nil {
		return gw, nil, err
	}
	spec.Binds = append(spec.Binds, compute.Bind{Src: gw.dir, Dst: wire.GatewayPath})
	return gw, nil, nil
}

// budgets splits a dispatch's wall clock into the setup scripts' budget and the agent's, in
// whole seconds, leaving the worker a margin to capture the patch. The worker kills the agent
// at its budget; the provider's wall clock at the full timeout is the backstop.
func budgets(timeout time.Duration) (setup, agent int) {
	margin := min(wire.CaptureMargin, timeout/5)
	setupD := min(2*time.Minute, timeout/4)
	setup = max(1, int(setupD.Seconds()))
	agent = max(1, int((timeout - setupD - margin).Seconds()))
	return setup, agent
}

// watchCancel polls the record's cancel flag (set by `agora dispatch cancel` in another
// process) and kills the sandbox when it is raised, or when limit fires. Polling keeps the
// contract simple: the flag lives in the database every process can reach.
func (d *Dispatcher) watchCancel(ctx context.Context, provider compute.Provider, id string, h compute.Handle, limit <-chan struct{}) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				provider.Cancel(context.WithoutCancel(ctx), h.TaskID())
				return
			case <-limit:
				provider.Cancel(context.WithoutCancel(ctx), h.TaskID())
				return
			case <-t.C:
				if d.Records.cancelRequested(ctx, id) {
					provider.Cancel(ctx, h.TaskID())
					return
				}
			}
		}
	}()
	return func() { close(done); <-finished }
}

// logSink caps and redacts one stream into a file. The redactor sits first, so the cap counts
// redacted bytes and a secret is never split by the cap into an unredacted prefix.
type logSink struct {
	mu        sync.Mutex // the sandbox's stream and the proxy's notices
	f         *os.File
	red       io.WriteCloser
	cap       *capWriter
	truncated bool
}

func newLogSink(path string, limit int64, red *redact.Redactor) (*logSink, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	c := &capWriter{w: f, left: limit}
	return &logSink{f: f, red: red.Writer(c), cap: c}, nil
}

func (l *logSink) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.red.Write(p)
}

// notice adds one line of agora's own to the log (the egress proxy's refusals, which a
// client such as git reports only as a status code), between the sandbox's writes.
func (l *logSink) notice(line string) {
	l.Write([]byte("agora: " + line + "\n"))
}

func (l *logSink) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	err := l.red.Close()
	l.truncated = l.cap.dropped
	return errors.Join(err, l.f.Close())
}

type capWriter struct {
	w       io.Writer
	left    int64
	dropped bool
}

func (c *capWriter) Write(p []byte) (int, error) {
	n := len(p)
	if int64(len(p)) > c.left {
		p = p[:c.left]
		c.dropped = true
	}
	if len(p) > 0 {
		if _, err := c.w.Write(p); err != nil {
			return 0, err
		}
		c.left -= int64(len(p))
	}
	return n, nil
}
