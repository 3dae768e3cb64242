package dispatch

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// Adoption makes the process that holds it a supervisor host (`agora orch serve`): its Reap
// adopts, instead of recording lost, every started dispatch whose supervisor died while its
// worker runs on without it (a provider that is a [compute.Adopter]: a Kubernetes Job or
// Sandbox). A one-shot command never holds one: it would adopt into a process about to exit.
type Adoption struct {
	// Role names the adopter in the dispatch.adopted entry ("serve").
	Role string

	wg sync.WaitGroup
}

// Wait returns once every supervision adopted so far has ended.
func (a *Adoption) Wait() { a.wg.Wait() }

// OrphanWait bounds how long a process that is no supervisor host leaves a started dispatch
// whose supervisor died, and whose worker outlives it, live for one to adopt: after that its
// Reap stops the worker and records the dispatch lost, as for a worker that died with its
// supervisor. The time counts from the first Reap that found the dispatch so.
var OrphanWait = 10 * time.Minute

// orphanMark, in the stage directory (the host's only), is made by the first Reap that found
// the dispatch's supervisor dead; its age is how long the dispatch has waited for an adopter.
const orphanMark = ".orphaned"

// AdoptOrphans adopts, in a supervisor host (d.Adopt set), every started dispatch whose
// supervisor died while its worker runs on, and ends nothing else: it is what serve runs
// every second, so that such a dispatch is adopted whether or not a run or a client follows
// it, without reaping what serve's other parts own (an accepted dispatch whose supervisor
// died is restarted by the orchestrator's Watch, not recorded lost). It returns how many it
// adopted.
func (d *Dispatcher) AdoptOrphans(ctx context.Context) (int, error) {
	if d.Adopt == nil {
		return 0, nil
	}
	live, err := d.Records.live(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range live {
		if r.State != lifecycle.DispatchStarted || supervisorAlive(r.supervisor) {
			continue
		}
		// Counted only when this process won it: another supervisor host that read the same
		// orphan at once lost the compare-and-set (claimAdoption) and adopted nothing.
		if _, _, adopted := d.orphanKept(ctx, r); adopted {
			n++
		}
	}
	return n, nil
}

// orphanKept decides, for Reap, what becomes of live dispatch r, whose supervisor is gone:
// kept when it stays live (adopted by this process now, by another, or waiting for a
// supervisor host), else Reap ends it; waited says it waited [OrphanWait] for an adopter in
// vain; adopted says this process adopted it now. Only a started dispatch whose provider
// keeps its worker without a supervisor is kept; a cancelled one is ended (its cancel stops
// the worker).
func (d *Dispatcher) orphanKept(ctx context.Context, r *Record) (kept, waited, adopted bool) {
	// sandbox: none runs on the host, with its supervisor: never adoptable (and its stage
	// is the worker's to write, so adoption reads nothing of it).
	if r.State != lifecycle.DispatchStarted || r.cancelRequested || r.ProviderTaskID == "" || r.Sandbox == compute.SandboxNone {
		return false, false, false
	}
	p, err := d.providerFor(ctx, r.Target)
	if err != nil {
		return false, false, false
	}
	ad, ok := p.(compute.Adopter)
	if !ok {
		return false, false, false
	}
	if d.Adopt == nil {
		if d.orphanedFor(r.ID) < OrphanWait {
			return true, false, false
		}
		// Ended by this process only if no serve adopted it meanwhile: the same
		// compare-and-set on the dead supervisor as an adoption, or Reap would stop a Job
		// that a serve starting just now follows.
		took, err := d.Records.takeOrphan(ctx, r)
		if err != nil || !took {
			return true, false, false
		}
		return false, true, false
	}
	won, err := d.Records.claimAdoption(ctx, r, d.Adopt.Role)
	if err != nil {
		d.log().Warn("reap: a dispatch whose supervisor died could not be adopted; the next reap retries",
			"dispatch", r.ID, "err", err.Error())
		return true, false, false
	}
	if won {
		os.Remove(filepath.Join(stageAt(d.StateDir, r.ID).dir, orphanMark))
		d.Adopt.wg.Add(1)
		go func() {
			defer d.Adopt.wg.Done()
			d.superviseAdopted(r.ID, ad)
		}()
	}
	return true, false, won
}

// Orphaned says how long started dispatch r has waited for a supervisor host to adopt it: its
// supervisor is gone, its worker outlives it, and a reap in a process that adopts nothing
// found it so (see orphanKept). false for any other dispatch.
func (d *Dispatcher) Orphaned(r *Record) (time.Duration, bool) {
	if r.State != lifecycle.DispatchStarted || supervisorAlive(r.supervisor) {
		return 0, false
	}
	fi, err := os.Lstat(filepath.Join(stageAt(d.StateDir, r.ID).dir, orphanMark))
	if err != nil || !fi.Mode().IsRegular() {
		return 0, false
	}
	return time.Since(fi.ModTime()), true
}

// orphanedFor is how long ago a Reap first found dispatch id's supervisor gone (marking it
// now when none had). A stage that cannot be marked counts as waited out.
func (d *Dispatcher) orphanedFor(id string) time.Duration {
	mark := filepath.Join(stageAt(d.StateDir, id).dir, orphanMark)
	fi, err := os.Lstat(mark)
	if errors.Is(err, fs.ErrNotExist) {
		f, err := os.OpenFile(mark, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			return OrphanWait
		}
		f.Close()
		return 0
	}
	if err != nil || !fi.Mode().IsRegular() {
		return OrphanWait
	}
	return time.Since(fi.ModTime())
}

// claimAdoption makes this process the supervisor of started dispatch r, whose recorded
// supervisor (r's) is gone, and audits it (dispatch.adopted) in the same transaction, before
// anything follows the worker. The update is a compare-and-set on the recorded supervisor:
// of processes reaping at once, exactly one adopts; the others get false.
func (s *Records) claimAdoption(ctx context.Context, r *Record, role string) (bool, error) {
	self := selfSupervisor()
	won := false
	err := s.db.Tx(ctx, func(tx *sql.Tx) error {
		won = false
		res, err := tx.ExecContext(ctx, `UPDATE dispatches SET supervisor = ? WHERE id = ? AND state = ? AND supervisor = ? AND cancel_requested = 0`,
			self, r.ID, lifecycle.DispatchStarted, r.supervisor)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return err
		}
		if _, err := s.log.Append(ctx, tx, audit.Entry{Actor: SystemActor, Kind: entry.DispatchAdopted, Subject: entry.Dispatch(r.ID),
			Details: map[string]any{"previous": r.supervisor, "supervisor": self, entry.KeyRole: role, "provider_task_id": r.ProviderTaskID}}); err != nil {
			return err
		}
		won = true
		return nil
	})
	return won, err
}

// takeOrphan makes this process the supervisor of started dispatch r, whose recorded
// supervisor is gone, so that it alone ends it; false when another process took it first.
func (s *Records) takeOrphan(ctx context.Context, r *Record) (bool, error) {
	took := false
	err := s.db.Tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE dispatches SET supervisor = ? WHERE id = ? AND state = ? AND supervisor = ?`,
			selfSupervisor(), r.ID, lifecycle.DispatchStarted, r.supervisor)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		took = n == 1
		return err
	})
	return took, err
}

// superviseAdopted carries adopted dispatch id to its end as its first supervisor would
// have: it follows the worker through the provider's Adopt (never a second start), then
// reconciles, runs the verify gate and records the end; the provider closes the gateway
// session and the worker's Secret goes with its Job. A dispatch it cannot follow (its Job
// gone, its stage gone, a model gateway or egress proxy that lived in the dead supervisor)
// has its worker stopped and ends failed/lost, as Reap would have recorded it.
//
// It runs under no caller's context: a serve that stops leaves the worker running for the
// next serve, as it leaves its detached supervisors.
func (d *Dispatcher) superviseAdopted(id string, ad compute.Adopter) {
	ctx := context.Background()
	r, err := d.Records.Get(ctx, id)
	if err != nil || r.State != lifecycle.DispatchStarted || r.supervisor != selfSupervisor() {
		return
	}
	sp := d.startDispatchSpan(ctx, r)
	s := &supervision{d: d, r: r, progress: func(string, *Record) {}, sp: sp}
	outcome, err := s.resume(ctx, ad)
	if err != nil {
		outcome = failed(lifecycle.ReasonProviderFailed, "%v", err)
	}
	if outcome.State == lifecycle.DispatchFailed && (outcome.Reason == lifecycle.ReasonLost || outcome.Reason == lifecycle.ReasonProviderFailed) &&
		d.Records.cancelRequested(ctx, id) {
		// Cancelled while it was adopted: the cancel stopped the task this process found
		// gone. It ends as its cancel asked, not lost (a plan runs a lost task
		// again).
		outcome = Outcome{State: lifecycle.DispatchCancelled, Reason: lifecycle.ReasonCancelled, Detail: "cancelled while agora orch serve adopted it"}
	}
	// Recorded, then done: a worker this process could not follow is stopped only once its
	// end is on record (audit before effect); unrecorded, it stays for the next serve.
	_, final, err := d.Records.finish(ctx, id, outcome)
	if err == nil && s.handle == nil {
		d.stopAndRelease(ctx, r)
	}
	s.cleanup()
	if err != nil {
		d.log().Warn("adopt: the end of an adopted dispatch could not be recorded; the next serve adopts it again",
			"dispatch", id, "err", err.Error())
		return
	}
	sp.finish(final)
}

// resume is run's counterpart for an adopted dispatch: what the first supervisor staged and
// started is found again, not made.
func (s *supervision) resume(ctx context.Context, ad compute.Adopter) (Outcome, error) {
	for _, step := range []func(context.Context) error{
		s.prepareAdopted, s.unseal, s.reopenLogs, s.buildSpec,
		func(ctx context.Context) error { return s.adoptSandbox(ctx, ad) }, s.wait,
	} {
		if err := step(ctx); err != nil {
			var f *failure
			if errors.As(err, &f) {
				return f.o, nil
			}
			return Outcome{}, err
		}
	}
	return s.settle(ctx), nil
}

// lostAt is the outcome of an adopted dispatch that cannot be followed.
func lostAt(format string, args ...any) error {
	return fail(lifecycle.ReasonLost, "the process supervising this dispatch exited before it ended, and it could not be adopted: "+format, args...)
}

// prepareAdopted is prepare for an adopted dispatch: the stage is the one its first
// supervisor made (with its disk quota, when that is still mounted); no uid is leased (the
// stage stays held, which keeps the uid taken, see leaseUID).
func (s *supervision) prepareAdopted(ctx context.Context) error {
	d, r := s.d, s.r
	var err error
	if s.target, err = d.Config.Target(r.Target); err != nil {
		return lostAt("%v", err)
	}
	if s.provider, err = d.providerFor(ctx, r.Target); err != nil {
		return lostAt("%v", err)
	}
	if s.pinned, err = d.loadPinned(ctx, r); err != nil {
		return fail(lifecycle.ReasonIntegrityFailed, "load pinned catalog content: %v", err)
	}
	if _, ok := modelRoute(s.pinned.doc.Runtime); ok {
		return lostAt("its model gateway, and the budget it counted, lived in that process")
	}
	if r.Network == NetworkProxy {
		return lostAt("its egress proxy lived in that process")
	}
	limits := limitsFor(s.target, r.Sandbox, r.ID)
	if d.testOnlyInvokingUser {
		limits.owner, limits.disk = nil, 0
	}
	st := stageAt(d.StateDir, r.ID)
	st.owner, st.sandboxed, st.podFiles = limits.owner, limits.sandboxed, limits.podFiles
	if st.sandboxed && st.owner == nil {
		// The first supervisor bound the shared entry of the pinned content at /agora/bundle,
		// with the dispatch's manifest.json over it (writeBundle, bundleBinds): the spec is
		// built with the same binds, so that its shape is the one the dispatch started with.
		// A pool's name hashes that shape: with the stage's own bundle directory bound
		// instead, a dispatch of a warm pool's pod looked for another pool and ended lost.
		st.shared = filepath.Join(d.StateDir, bundlesDir, bundleKey(bundleVersions(s.pinned)))
	}
	_, serr := os.Lstat(st.dir)
	missing := errors.Is(serr, fs.ErrNotExist)
	// A stage that is there may be one this replica made before another led (a takeover
	// and then one back to this replica's volume): the other took the dispatch
	// over since, and the worker's result may be on its disk. It is stale when the dispatch
	// was adopted more often than when the stage was made (adoptionsMark).
	stored := d.Records.sessionStored(ctx, r.ID)
	stale := stored && serr == nil && d.Records.adoptedSince(ctx, r.ID, st)
	if stored && (missing || stale) {
		// No stage (or a stale one), and a gateway session stored in agora.db: the
		// replica that exported it, or took it over last, led before this one restored
		// agora.db from its replica, and the stage was on its disk. Made again (below,
		// fill): a worker killed with that replica while it fetched its inputs fetches them
		// again here (netgw's restore), and only what it uploads here from now on is its
		// result (reconcile).
		if r.Verify != nil {
			return lostAt("its verify gate needs the stage, which was on the replica that led before the takeover")
		}
		if stale {
			// Its disk quota and pinned content may still be mounted (the replica's
			// supervisor died, its mount namespace did not): unmounted first, or the
			// removal stops at the mount point.
			st.removeWork()
			if err := os.RemoveAll(st.dir); err != nil {
				return lostAt("remove its stage, made before another replica took it over: %v", err)
			}
		}
		if err := restage(st, limits.disk); err != nil {
			return lostAt("make its stage again after a takeover: %v", err)
		}
		if err := d.Records.markAdoptions(ctx, r.ID, st); err != nil {
			return lostAt("make its stage again after a takeover: %v", err)
		}
		s.restaged = true
	} else if stored && serr == nil {
		// A stage kept across this adoption is this supervisor's now: marked so that a later
		// adoption on this disk (another restart here) does not take it for stale.
		if err := d.Records.markAdoptions(ctx, r.ID, st); err != nil {
			return lostAt("mark its stage adopted: %v", err)
		}
	}
	if fi, err := os.Lstat(filepath.Join(st.disk, wire.OutDir)); err == nil && fi.IsDir() {
		st.workspace, st.out, st.diskSize = filepath.Join(st.disk, wire.WorkspaceDir), filepath.Join(st.disk, wire.OutDir), limits.disk
	} else {
		st.disk = ""
	}
	if fi, err := os.Lstat(filepath.Join(st.pinned, wire.BundleDir)); err == nil && fi.IsDir() {
		// Its bundle and capability files are on the pinned content's tmpfs (newStageFrom).
		st.bundle, st.capFiles = filepath.Join(st.pinned, wire.BundleDir), filepath.Join(st.pinned, wire.CapabilityFilesDir)
	}
	for _, dir := range []string{st.bundle, st.out} {
		if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
			return lostAt("its stage is gone")
		}
	}
	if err := st.hold(); err != nil {
		return err
	}
	s.st = st
	s.inputs = filepath.Join(st.dir, wire.InputsDir)
	if s.restaged {
		s.pinned.runtimeBinary = r.RuntimeBinary // what the first supervisor resolved and recorded
		if err := s.fill(ctx); err != nil {
			// Not fatal: the worker most likely fetched its stage long before the takeover.
			// What was not made is not offered (adoptSandbox binds the result alone), so a
			// worker still fetching is refused, never served a part.
			s.unfilled = true
			d.log().Warn("adopt: the stage could not be made again after a takeover; a worker that had not fetched it yet ends lost",
				"dispatch", r.ID, "err", err.Error())
		}
	}
	return nil
}

// reopenLogs is openLogs appending to what the first supervisor wrote, within the same caps.
func (s *supervision) reopenLogs(context.Context) error {
	var err error
	if s.stdout, err = appendLogSink(s.st.stdout, MaxStdout, s.red); err != nil {
		return err
	}
	if s.stderr, err = appendLogSink(s.st.stderr, MaxStderr, s.red); err != nil {
		return err
	}
	s.stderr.notice("the process supervising this dispatch exited; " + selfSupervisor() + " adopted it and follows its worker")
	if s.restaged {
		s.stderr.notice("adopted after a takeover: what the worker wrote before it is in the log the replica that led before kept")
	}
	return nil
}

// restage makes an adopted dispatch's stage again where the replica that led before the
// takeover had it (the same AGORA_HOME path on every replica), as newStage makes a cold one:
// the bundle and out directories, 0700, and, for a root agora (disk > 0), the disk quota its
// workspace and out directory were in (the session's result mount names that path). fill
// writes the rest. The held entry is prepareAdopted's.
func restage(st *stage, disk int64) error {
	if err := os.MkdirAll(filepath.Dir(st.dir), 0o700); err != nil {
		return err
	}
	if err := os.Mkdir(st.dir, 0o700); err != nil {
		return err
	}
	if disk > 0 && mountQuota(st.disk, filepath.Base(st.dir), disk) == nil {
		st.workspace, st.out = filepath.Join(st.disk, wire.WorkspaceDir), filepath.Join(st.disk, wire.OutDir)
	}
	for _, dir := range []string{st.bundle, st.out} {
		if err := os.Mkdir(dir, 0o700); err != nil {
			return err
		}
	}
	return nil
}

// adoptionsMark, in a stage made again after a takeover, is how many times agora.db had
// recorded the dispatch adopted (dispatch.adopted) when it was made, this adoption included. A
// stage without it was made by the dispatch's first supervisor (none then).
const adoptionsMark = ".adoptions"

// adoptions counts dispatch id's dispatch.adopted entries.
func (s *Records) adoptions(ctx context.Context, id string) (int, error) {
	var n int
	err := s.db.SQL().QueryRowContext(ctx, `SELECT count(*) FROM audit_entries WHERE kind = ? AND subject = ?`,
		entry.DispatchAdopted, entry.Dispatch(id)).Scan(&n)
	return n, err
}

// adoptedSince reports whether dispatch id, being adopted now, was adopted by another
// supervisor after stage st was made: st is then what this host's disk kept from before
// another replica took the dispatch over. Unreadable counts are stale (fail closed: the
// dispatch is at worst run again, never reconciled from a stale out directory).
func (s *Records) adoptedSince(ctx context.Context, id string, st *stage) bool {
	n, err := s.adoptions(ctx, id)
	if err != nil {
		return true
	}
	made := 0
	f, err := os.OpenFile(filepath.Join(st.dir, adoptionsMark), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return true
	default:
		b, rerr := io.ReadAll(io.LimitReader(f, 32))
		f.Close()
		if rerr != nil {
			return true
		}
		if made, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
			return true
		}
	}
	// n includes this adoption (claimAdoption recorded it before prepareAdopted).
	return n-1 > made
}

// markAdoptions writes st's adoptionsMark: the adoptions of dispatch id recorded now.
func (s *Records) markAdoptions(ctx context.Context, id string, st *stage) error {
	n, err := s.adoptions(ctx, id)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(st.dir, adoptionsMark), []byte(strconv.Itoa(n)+"\n"), 0o600)
}

// sessionStored reports whether agora.db holds a gateway session of dispatch id
// (netgw.SessionMigrations): false without the table, or when it cannot be read.
func (s *Records) sessionStored(ctx context.Context, id string) bool {
	var n int
	err := s.db.SQL().QueryRowContext(ctx, `SELECT count(*) FROM gateway_sessions WHERE dispatch_id = ?`, id).Scan(&n)
	return err == nil && n == 1
}

// adoptSandbox follows the dispatch's running task through the provider, which starts
// nothing: a dispatch whose task is gone ends lost.
func (s *supervision) adoptSandbox(ctx context.Context, ad compute.Adopter) error {
	if s.restaged && len(s.secrets) > 0 {
		// Taken over from another replica: a worker killed with it before it read the
		// secrets object reads it from this one (netgw's restore serves spec.Files then).
		rd, err := secretsPipe(s.secrets)
		if err != nil {
			return err
		}
		s.spec.Files = []*os.File{rd}
		defer func() { rd.Close(); s.spec.Files = nil }()
	}
	if s.unfilled {
		spec := s.spec
		spec.Binds = nil
		for _, b := range s.spec.Binds {
			if b.Result {
				spec.Binds = append(spec.Binds, b)
			}
		}
		s.spec = spec
	}
	h, err := ad.Adopt(ctx, s.spec)
	if err == nil && h == nil && warmPoolTarget(s.target) {
		h, err = s.adoptPooled(ctx)
	}
	if err != nil {
		return lostAt("%v", err)
	}
	if h == nil {
		return lostAt("its worker is gone")
	}
	if h.TaskID() != s.r.ProviderTaskID {
		// The record names another task (its verify gate's): the agent's ended already.
		h.Wait()
		return lostAt("its verify gate was running")
	}
	s.handle = h
	return nil
}
