package dispatch

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/egress/proxy"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/runtime/runtimes"
	"github.com/agora-dev/agora/internal/secret/redact"
	"github.com/agora-dev/agora/internal/store"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// run is one dispatch's supervision, in the order a reader follows it: prepare (target,
// provider, pinned content, uid and stage), stage (the bundle, workspace, inputs and
// capability files), unseal (secrets and the redactor), open the logs, build the sandbox's
// spec, start the network it reaches out through, start the sandbox, wait for it, and
// settle (reconcile, then the verify gate). A step that fails the dispatch returns a
// *failure (its outcome); any other error is the host's own trouble. What the steps hold is
// released in one place, cleanup, whatever step ended the run.
//
// cleanup is the caller's, after it has recorded the end (Supervise): nothing of the
// outcome is read from what it removes, and the record's end does not wait on unmounts.
// A supervisor killed in between leaves a terminal record with its stage held,
// which Reap releases as it does any dead supervisor's.
func (s *supervision) run(ctx context.Context) (Outcome, error) {
	for _, step := range []func(context.Context) error{
		s.prepare, s.stage, s.unseal, s.openLogs, s.buildSpec, s.startNetwork, s.startSandbox, s.wait,
	} {
		if err := step(ctx); err != nil {
			var f *failure
			if errors.As(err, &f) {
				return f.o, nil
			}
			return Outcome{}, err
		}
	}
	// Settling acts on the world (the verify gate's sandbox, a push): not under a closed
	// leader fence, whose dispatch the new leader may have adopted (Supervise abandons it).
	if err := store.CheckFence(); err != nil {
		return Outcome{}, err
	}
	return s.settle(ctx), nil
}

// failure is a step's failed outcome: the dispatch cannot run, for a reason it records.
type failure struct{ o Outcome }

func (f *failure) Error() string { return f.o.Reason + ": " + f.o.Detail }

func fail(reason, format string, args ...any) error {
	return &failure{failed(reason, format, args...)}
}

// supervision is what one run's steps hand each other.
type supervision struct {
	d        *Dispatcher
	r        *Record
	progress Progress
	sp       *dispatchSpan

	target   config.Target
	provider compute.Provider
	pinned   *pinned
	lease    *uidLease
	warm     *warmSlot // a claimed warm slot, until startSandbox runs in it or spends it
	bins     *binaries // what the sandbox runs, until startSandbox records them
	st       *stage
	endpoint *modelEndpoint
	inputs   string // the stage's inputs directory

	secrets  map[string]string // the worker's secrets, by env name (bound ones hold placeholders)
	values   [][]byte          // every secret value, masked in all that is stored
	bindings []proxy.Binding
	red      *redact.Redactor

	stdout, stderr *logSink
	spec           compute.Spec
	trip           *limitTrip
	gw             *runningGateway
	handle         compute.Handle
	// lifeline is the write end of a cold local sandbox's lifeline pipe (startCold): held,
	// never written, until the sandbox has ended.
	lifeline *os.File
	exit     compute.Exit
	waitErr  error
	// abandoned: the leader fence closed before the dispatch's end (Supervise): cleanup
	// releases nothing the new leader may have adopted.
	abandoned bool
	// restaged: an adopted dispatch whose stage this replica made again after a takeover
	// (adopt.go): only what the worker uploads here from now on is its result.
	restaged bool
	// unfilled: a restaged stage that could not be made again (its repository is not on
	// this replica, say): only its result is bound, so the taken-back session offers nothing
	// else to fetch (410), and a worker that fetched its stage before the takeover runs on.
	unfilled bool
}

// enter records a host-side phase: on the stage (for the sandbox's own view), as a span,
// and to the caller's progress.
func (s *supervision) enter(phase string) {
	s.st.setPhase(phase)
	s.sp.phase(phaseSpan(phase))
	s.progress(phase, s.r)
}

// cleanup releases what the steps took, in reverse: the logs (if a step failed before the
// sandbox ended), the network, the sandbox's task (gone before anything else is released;
// a warm slot's claim mounts come down in the background, see teardown), the stage's work
// (after collection: reconcile reads the out directory first; it unmounts the disk quota),
// and last the uid lease, held until the stage's work is gone.
func (s *supervision) cleanup() {
	s.closeLogs()
	_ = s.gw.close()
	s.release()
}

// release is cleanup after the logs and the network: the sandbox's task, its stage's work
// and the uid lease. It touches nothing the dispatch's record or its caller reads.
func (s *supervision) release() {
	if s.abandoned {
		// As a supervisor killed here: the task, the stage and the uid lease stay for the
		// leader that holds the lease, whose reap or adoption takes them.
		return
	}
	if s.handle != nil {
		if s.d.Warm != nil {
			s.d.Warm.teardown(s.handle)
		} else {
			_, _ = s.handle.Wait()
		}
	}
	if s.lifeline != nil {
		// The worker has exited (or never started): nothing reads the pipe now.
		_ = s.lifeline.Close()
	}
	if s.st != nil {
		s.st.removeWork()
	}
	if s.warm != nil {
		s.warm.slot.Discard() // claimed, never run: killed; its uid lease is s.lease
	}
	if s.st != nil && s.st.release != nil {
		// A warm slot's stage: its quota's unmount and its removal, and the uid lease
		// after them, go in the background, as the slot's teardown does; Close and a
		// standby's end wait for it, and a holder killed meanwhile leaves it to the sweep.
		// The slot lets go of its own hold on the stage when its sandbox's host side is
		// down (the handle's Wait, not Exited): released before that, this release was not
		// the last, and the uid went back with the stage still up.
		release, lease, h := s.st.release, s.lease, s.handle
		s.lease = nil
		s.d.Warm.teardowns.Go(func() {
			if h != nil {
				_, _ = h.Wait()
			}
			release()
			lease.release()
		})
	}
	if s.lease != nil {
		s.lease.release()
	}
}

// prepare resolves the target and its provider, loads the pinned catalog content, leases a
// sandbox uid (root) and makes the stage.
func (s *supervision) prepare(ctx context.Context) error {
	d, r := s.d, s.r
	var err error
	if s.target, err = d.Config.Target(r.Target); err != nil {
		return fail(lifecycle.ReasonProviderFailed, "%v", err)
	}
	if s.provider, err = d.providerFor(ctx, r.Target); err != nil {
		return fail(lifecycle.ReasonProviderFailed, "%v", err)
	}
	if s.pinned, err = d.loadPinned(ctx, r); err != nil {
		return fail(lifecycle.ReasonIntegrityFailed, "load pinned catalog content: %v", err)
	}
	limits := limitsFor(s.target, r.Sandbox, r.ID)
	if d.testOnlyInvokingUser {
		limits.owner, limits.disk = nil, 0
	}
	limits.pinned = limits.disk > 0 && d.fitsPinnedTmpfs(s.pinned)
	if limits.owner != nil && d.Warm != nil {
		// A warm slot runs as the uid it leased: the dispatch adopts it, so its stage is
		// handed to the uid the slot runs as.
		if s.warm = d.Warm.claim(r.Target, r.ID); s.warm != nil && s.warm.lease != nil {
			s.lease = s.warm.lease
			limits.owner = &compute.HostUser{UID: s.lease.uid, GID: s.lease.uid}
		}
	}
	if limits.owner != nil && s.lease == nil {
		s.lease, err = leaseUID(d.StateDir, s.target.SandboxUID, r.ID)
		if errors.Is(err, errNoFreeUID) && d.settleTeardowns(ctx) {
			s.lease, err = leaseUID(d.StateDir, s.target.SandboxUID, r.ID)
		}
		if err != nil {
			return fail(lifecycle.ReasonProviderFailed, "%v", err)
		}
		limits.owner = &compute.HostUser{UID: s.lease.uid, GID: s.lease.uid}
	}
	if left := stageAt(d.StateDir, r.ID); lstatOK(left.dir) {
		// A stage of this accepted dispatch is on this disk already: a supervisor of it died
		// while it staged (this process claimed the dispatch from a dead one: a leader's pod
		// killed and started again on its volume). Its work goes first; a half-made stage
		// fails this one's (its capability files' directory exists).
		left.removeWork()
	}
	var pre *prestaged
	if s.warm != nil {
		pre = s.warm.takeStage(limits)
	}
	if s.st, err = newStageFrom(d.StateDir, r.ID, limits, pre); err != nil {
		if pre != nil {
			pre.release()
		}
		return err
	}
	s.sp.setCapabilities(s.pinned.doc.Capabilities)
	return nil
}

// stage writes what the sandbox binds: the bundle, the workspace, the inputs and the
// capability files, handed over to the sandbox user.
func (s *supervision) stage(ctx context.Context) error {
	d, r, p, st := s.d, s.r, s.pinned, s.st
	// The stage's phase file and logs are made beside the staging (makeFiles), the phase
	// file holding this phase.
	st.makeFilesBeside(PhaseStaging)
	s.sp.phase(phaseSpan(PhaseStaging))
	s.progress(PhaseStaging, s.r)
	// The exec-only worker never runs on a target with warm slots: its cold dispatches teach
	// the slots their shape, the worker's bind with it, and a slot runs what it started with.
	wb, fl := d.workerBinary(ctx, s.target, r.Sandbox, runtimes.ExecOnly(p.doc.Runtime) && s.target.Warm == 0 && s.warm == nil)
	if fl != nil {
		return &failure{*fl}
	}
	if err := st.checkRunnable(wb); err != nil {
		return fail(lifecycle.ReasonProviderFailed, "%v", err)
	}
	// The model endpoint and key leave the plan before the bundle is written: the worker
	// never learns them; the gateway uses them.
	var err error
	if s.endpoint, err = d.takeModelEndpoint(ctx, p); err != nil {
		return fail(lifecycle.ReasonFetchFailed, "%v", err)
	}
	// The host's agent CLI, resolved now (what runs is what is recorded), bound read-only.
	rb, fl := d.runtimeBinary(ctx, p.doc.Runtime, r.Sandbox)
	if fl != nil {
		return &failure{*fl}
	}
	wi := workerImage(s.target, r.Sandbox)
	// Recorded before the sandbox runs anything (startSandbox): with the started transaction
	// of a warm slot's claim, or on their own before any other start.
	s.bins = &binaries{runtime: rb, worker: wb, image: wi}
	r.RuntimeBinary, p.runtimeBinary, r.WorkerBinary, r.WorkerImage = rb, rb, wb, wi

	return s.fill(ctx)
}

// fill writes the stage's content from the accepted dispatch: the bundle, the workspace, the
// inputs and the capability files, handed over to the sandbox user. Everything it writes
// follows from the dispatch's record and pinned content, so a stage filled again after a
// takeover (prepareAdopted) holds what the first one held.
func (s *supervision) fill(ctx context.Context) error {
	d, r, p, st := s.d, s.r, s.pinned, s.st
	setupTimeout, agentTimeout := budgets(time.Duration(r.Timeout))
	if err := d.writeBundle(r, p, st, agentTimeout, setupTimeout, s.target.ApprovalTimeout); err != nil {
		return fmt.Errorf("stage bundle: %w", err)
	}
	stack, err := d.stackPatches(r.Inputs)
	if err != nil {
		return fail(lifecycle.ReasonIntegrityFailed, "stage the stacked base: %v", err)
	}
	if err := prepareWorkspace(ctx, r, st, stack); err != nil {
		var ce *StackConflictError
		var me *stackMismatchError
		var re *stackReadError
		full := st.cloneExceeded(err, r.Target)
		switch {
		case errors.As(err, &ce) && full == "":
			// (A patch that did not apply for want of room on the quota is the quota's.)
			return fail(lifecycle.ReasonStackConflict, "%v", err)
		case errors.As(err, &me):
			return fail(lifecycle.ReasonIntegrityFailed, "%v", err)
		case errors.As(err, &re):
			return fail(lifecycle.ReasonIntegrityFailed, "stage the stacked base: %v", err)
		}
		if full != "" {
			// The clone counts against the quota too.
			return fail(lifecycle.ReasonLimitExceeded, "%s while cloning %s", full, r.Repo)
		}
		return fail(lifecycle.ReasonFetchFailed, "%v", err)
	}
	s.inputs = filepath.Join(st.dir, wire.InputsDir)
	if len(r.Inputs) > 0 {
		if err := d.stageInputs(r.Inputs, s.inputs); err != nil {
			return fail(lifecycle.ReasonIntegrityFailed, "stage inputs: %v", err)
		}
	}
	if err := d.stageCapabilityFiles(p, st.capabilityFilesDir(), st.release != nil); err != nil {
		return fail(lifecycle.ReasonIntegrityFailed, "stage capability files: %v", err)
	}
	return st.handOver(st.bundle, st.workspace, st.out, s.inputs, st.capabilityFilesDir())
}

// unseal opens the dispatch's secrets and builds the redactor that masks every one of them
// (and the model key) in everything stored.
func (s *supervision) unseal(ctx context.Context) error {
	s.secrets = map[string]string{}
	if s.endpoint != nil && len(s.endpoint.key) > 0 {
		// Never in the sandbox, but masked in everything stored all the same.
		s.values = append(s.values, append([]byte(nil), s.endpoint.key...))
	}
	for k, ref := range s.pinned.secretRefs {
		v, err := s.d.Unseal(ctx, ref)
		if err != nil {
			return fail(lifecycle.ReasonFetchFailed, "unseal secret %s: %v", k, err)
		}
		s.secrets[k] = string(v)
		s.values = append(s.values, v)
	}
	// A bound secret's value stays on the host: the sandbox gets a placeholder the proxy swaps
	// back, for the bound hosts only. values keeps the value, so it is masked all the same.
	var err error
	if s.bindings, err = bindSecrets(s.secrets, s.pinned.bindings); err != nil {
		return err
	}
	s.red = redact.New(s.values)
	return nil
}

// openLogs opens the sandbox's stdout and stderr sinks, capped and redacted. closeLogs is
// the one place they are closed.
func (s *supervision) openLogs(context.Context) error {
	stdout, stderr, err := s.st.takeLogs()
	if err != nil {
		return err
	}
	s.stdout, s.stderr = newLogSink(stdout, MaxStdout, s.red), newLogSink(stderr, MaxStderr, s.red)
	// network: host is the explicit unsafe escape: every dispatch that takes it says so in its
	// own log, whichever door it came through (CLI, MCP, a plan), not only on a terminal.
	if s.r.Network == NetworkHost {
		s.stderr.notice("WARNING: this dispatch has the host's network, unrestricted and unaudited (target network: host)")
	}
	return nil
}

// closeLogs closes the sinks once: when the sandbox has ended (reconcile reads the files
// next) or, for a run that ended before, at cleanup.
func (s *supervision) closeLogs() {
	for _, l := range []*logSink{s.stdout, s.stderr} {
		if l != nil {
			l.Close()
		}
	}
}

// buildSpec is the sandbox's spec: the worker, its limits and its binds.
func (s *supervision) buildSpec(context.Context) error {
	r, st, target := s.r, s.st, s.target
	s.spec = compute.Spec{
		ID:      r.ID,
		Argv:    []string{wire.BinPath, "worker"},
		Env:     []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "LANG=C.UTF-8", "AGORA_DISPATCH_ID=" + r.ID},
		Dir:     wire.WorkspacePath,
		Network: r.Network == NetworkHost,
		Sandbox: r.Sandbox,
		Limits: compute.Limits{
			Timeout: time.Duration(r.Timeout), MaxProcs: target.MaxProcs, FileSize: int64(target.FileSize), Memory: int64(target.Memory),
			// /tmp holds the baseline's copy of the workspace: as large as the disk quota.
			Scratch: int64(target.Disk),
			Disk:    int64(target.Disk),
		},
		Stdout: s.stdout, Stderr: s.stderr,
		// Root runs the sandbox as the target's sandbox uid; nil leaves it the invoking user.
		RunAs: st.owner,
		Binds: append(append(workerBind(r.WorkerBinary), st.bundleBinds(wire.BundlePath)...),
			compute.Bind{Src: st.workspace, Dst: wire.WorkspacePath, Writable: true},
			compute.Bind{Src: st.out, Dst: wire.OutPath, Writable: true, Result: true},
			compute.Bind{Src: st.capabilityFilesDir(), Dst: wire.CapabilityFilesPath},
		),
	}
	rbBinds, err := s.d.runtimeBinaryBinds(r.RuntimeBinary, target, r.Sandbox)
	if err != nil {
		return err
	}
	s.spec.Binds = append(s.spec.Binds, rbBinds...)
	if len(r.Inputs) > 0 {
		s.spec.Binds = append(s.spec.Binds, compute.Bind{Src: s.inputs, Dst: wire.InputsPath})
	}
	// Host-side enforcers trip this to stop the sandbox and fail the dispatch limit-exceeded.
	s.trip = newLimitTrip()
	return nil
}

// startSandbox hands the secrets over a pipe, starts the sandbox and records it started.
func (s *supervision) startSandbox(ctx context.Context) error {
	d, r, st := s.d, s.r, s.st
	if r.Sandbox == compute.SandboxNone {
		// No mount namespace: the worker finds its files at their host paths.
		s.spec.Argv = []string{r.WorkerBinary.Path, "worker"}
		s.spec.Binds = nil
		s.spec.Env = append(s.spec.Env, wire.RootEnv+"="+st.dir)
		s.spec.Dir = st.workspace
	}
	var secretsRead *os.File
	if len(s.secrets) > 0 {
		rd, err := secretsPipe(s.secrets)
		if err != nil {
			return err
		}
		secretsRead = rd
		s.spec.Files = []*os.File{rd}
	}

	s.enter(PhaseSandbox)
	// A cancel asked for before the sandbox exists ends the dispatch here: watchCancel would
	// see it only after the agent had run for up to a poll. One asked for
	// after this check is watchCancel's.
	cancelled, err := s.cancelledBeforeStart(ctx)
	if err != nil {
		return err
	}
	if cancelled {
		return &failure{Outcome{State: lifecycle.DispatchCancelled, Reason: lifecycle.ReasonCancelled, Detail: "cancelled before the sandbox started"}}
	}
	var (
		h       compute.Handle
		warmed  bool
		started *Record // recorded by a warm slot's claim before it released the slot
	)
	if s.warm != nil {
		if h, started, warmed, err = s.startWarm(ctx); err != nil {
			if secretsRead != nil {
				secretsRead.Close()
			}
			return err
		}
	} else if warmPoolTarget(s.target) {
		// A pool pod (warmpool.go), claimed where the cold start would be: the binaries are
		// on record first, and the start is recorded below, as a cold one's.
		if err := s.recordBinaries(ctx); err != nil {
			if secretsRead != nil {
				secretsRead.Close()
			}
			return err
		}
		h, warmed = s.startPool(ctx)
	}
	if !warmed {
		if err := s.recordBinaries(ctx); err != nil {
			if secretsRead != nil {
				secretsRead.Close()
			}
			return err
		}
		if h, err = s.startCold(ctx); err == nil {
			if d.Warm != nil {
				d.Warm.learn(r.Target, s.target, s.spec)
			} else {
				// A detached supervisor: the holder of the target's standbys learns from it.
				d.saveTemplate(r.Target, s.target, s.spec)
			}
		}
	}
	if secretsRead != nil {
		secretsRead.Close()
	}
	if err != nil {
		return fail(lifecycle.ReasonProviderFailed, "%v", err)
	}
	if started == nil {
		rh, resumed := h.(compute.Resumed)
		resumed = resumed && rh.Resumed()
		if started, err = d.Records.startedAs(ctx, r.ID, h.TaskID(), selfSupervisor(), nil, resumed); err != nil {
			s.provider.Cancel(context.WithoutCancel(ctx), h.TaskID())
			h.Wait()
			return err
		}
		if resumed {
			// Its pod was made by a supervisor that died (a leader's, most likely): a result
			// it uploaded there, or inputs it could not fetch from there, are not this
			// stage's. A missing result is then lost, never the agent's failure.
			s.restaged = true
		}
		if resumed && s.st != nil {
			// The stage is this supervisor's, adopted: marked so that a later adoption on this
			// disk does not take it for stale (adoptedSince). Unmarked, that adoption would
			// start the stage again empty: at worst the dispatch's result is lost, never mixed.
			_ = d.Records.markAdoptions(ctx, r.ID, s.st)
		}
	}
	s.handle = h
	s.progress(lifecycle.DispatchStarted, started)
	return nil
}

// startCold starts the sandbox of s.spec. A bubblewrap sandbox also gets a lifeline
// (wire.LifelineFDEnv): bwrap ties the sandbox's life to its own only once the sandbox is
// released, so this supervisor killed with -9 in between would leave the agent running
// with no supervisor; the worker ends it when the pipe closes. The spec learnt for warm
// slots stays without it: a slot's worker has its claim pipe.
func (s *supervision) startCold(ctx context.Context) (compute.Handle, error) {
	if s.provider != s.d.LocalProvider || s.r.Sandbox == compute.SandboxNone {
		// Without a sandbox the worker is this process's child, dead with it (Pdeathsig).
		return s.provider.Start(ctx, s.spec)
	}
	rd, wr, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("lifeline pipe: %w", err)
	}
	defer rd.Close() // the sandbox holds its own copy once started
	spec := s.spec
	spec.Files = append(slices.Clip(s.spec.Files), rd)
	spec.Env = append(slices.Clip(s.spec.Env), fmt.Sprintf("%s=%d", wire.LifelineFDEnv, 2+len(spec.Files)))
	h, err := s.provider.Start(ctx, spec)
	if err != nil {
		wr.Close()
		return nil, err
	}
	s.lifeline = wr
	return h, nil
}

// wait runs the agent phase to the sandbox's end, then begins capture: the logs are closed
// and every request of the worker answered and audited before anything is reconciled.
func (s *supervision) wait(ctx context.Context) error {
	s.enter(PhaseAgent)
	stopWatch := s.d.watchCancel(ctx, s.provider, s.r.ID, s.handle, s.trip.C())
	s.exit, s.waitErr = exited(s.handle)
	stopWatch()
	s.enter(PhaseCapture)
	s.closeLogs()
	// Its only error is a socket it could not remove, and its directory goes with it.
	_ = s.gw.close()
	s.exit.Isolation = s.st.isolation(s.exit.Isolation)
	if full := s.st.diskExceeded(s.r.Target); full != "" {
		// Found after the sandbox exited: the agent's writes stopped at the quota.
		s.trip.Trip(full)
	}
	return nil
}

// cancelledBeforeStart reports whether a cancel was asked for before the sandbox exists. A
// cold start records the binaries it runs in the same transaction (recordBinaries has
// nothing left to do): one query and one commit, not a query and then a commit. A warm
// slot's claim records them with its start.
func (s *supervision) cancelledBeforeStart(ctx context.Context) (bool, error) {
	if s.warm != nil || warmPoolTarget(s.target) || s.bins.none() {
		return s.d.Records.cancelRequested(ctx, s.r.ID), nil
	}
	var cancelled bool
	err := s.d.Records.db.Tx(ctx, func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, `SELECT cancel_requested FROM dispatches WHERE id = ?`, s.r.ID).Scan(&cancelled); err != nil {
			return err
		}
		if cancelled {
			return nil
		}
		return setBinaries(ctx, tx, s.r.ID, s.bins)
	})
	if err != nil {
		return false, fmt.Errorf("record the binaries dispatch %s runs: %w", s.r.ID, err)
	}
	if !cancelled {
		s.bins = nil
	}
	return cancelled, nil
}

// recordBinaries records what the sandbox runs, once, before a start that records them in
// no transaction of its own.
func (s *supervision) recordBinaries(ctx context.Context) error {
	b := s.bins
	s.bins = nil
	if b.none() {
		return nil
	}
	return s.d.Records.db.Tx(ctx, func(tx *sql.Tx) error { return setBinaries(ctx, tx, s.r.ID, b) })
}

// exitWaiter is a handle that can report its task's end before the provider has taken down
// what it keeps on the host for it (local's warm slot: the claim's mounts).
type exitWaiter interface {
	Exited() (compute.Exit, error)
}

// exited waits for h's process tree to be gone and returns how it ended.
func exited(h compute.Handle) (compute.Exit, error) {
	if w, ok := h.(exitWaiter); ok {
		return w.Exited()
	}
	return h.Wait()
}

// settle reconciles the sandbox's end into an outcome and runs the verify gate on it.
func (s *supervision) settle(ctx context.Context) Outcome {
	s.sp.phase(SpanReconcile)
	o := s.d.reconcile(context.WithoutCancel(ctx), reconcileInput{
		r: s.r, st: s.st, exit: s.exit, werr: s.waitErr, trip: s.trip, red: s.red,
		stdout: s.stdout, stderr: s.stderr, transcript: s.endpoint != nil, restaged: s.restaged,
	})
	o.Net, o.Usage = s.gw.netStats(), s.gw.usage()
	if s.r.Verify != nil && o.State == lifecycle.DispatchFinished {
		// The agent's sandbox has exited and been reaped, and its products are stored: the
		// gate runs on the stored patch alone, in a sandbox of its own.
		o = s.d.gate(ctx, s.r, s.st, s.provider, s.target, o, s.red, s.enter)
	}
	return o
}

// startNetwork starts what the sandbox reaches the outside through, in one socket directory
// bound at /agora/gateway: the model gateway for a model runtime, the egress proxy for
// network: proxy (with its trust store). It fails the dispatch for what it cannot run
// without, or returns an error for the host's own trouble.
func (s *supervision) startNetwork(ctx context.Context) error {
	d, r, st, ep := s.d, s.r, s.st, s.endpoint
	if ep == nil && r.Network != NetworkProxy {
		return nil
	}
	gw, err := openGatewayDir(st)
	if err != nil {
		return fail(lifecycle.ReasonProviderFailed, "%v", err)
	}
	s.gw = gw
	if ep != nil {
		if err := d.startGateway(ctx, r, gw, ep, s.values, s.trip, gatewayTracer(s.sp)); err != nil {
			return fail(lifecycle.ReasonProviderFailed, "%v", err)
		}
	}
	if r.Network == NetworkProxy {
		ns, err := d.prepareProxy(r, st, s.bindings)
		if err != nil {
			return fail(lifecycle.ReasonProviderFailed, "egress proxy: %v", err)
		}
		if err := d.startProxy(r, gw, ns, s.trip, s.stderr.notice); err != nil {
			return fail(lifecycle.ReasonProviderFailed, "%v", err)
		}
		s.spec.Binds = append(s.spec.Binds, ns.trustBinds()...)
		if ns.token != "" {
			s.spec.Env = append(s.spec.Env, wire.ProxyTokenEnv+"="+ns.token)
		}
	}
	// The sandbox user must be able to connect to the sockets.
	if err := st.handOver(gw.dir); err != nil {
		return err
	}
	s.spec.Binds = append(s.spec.Binds, compute.Bind{Src: gw.dir, Dst: wire.GatewayPath})
	return nil
}

// secretsPipe is the read end of a pipe that carries secrets as the worker's secrets object
// (JSON); the write end closes once it is written.
func secretsPipe(secrets map[string]string) (*os.File, error) {
	rd, wr, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	body, _ := json.Marshal(secrets)
	go func() {
		// The pipe holds at most 64 KiB; the worker reads it fully before anything else.
		wr.Write(body)
		wr.Close()
	}()
	return rd, nil
}
