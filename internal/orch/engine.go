package orch

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"github.com/agora-dev/agora/internal/budget"
	mrand "math/rand/v2"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/plan"
	"github.com/agora-dev/agora/internal/orch/rowlog"
	"github.com/agora-dev/agora/internal/store"
)

// maxBatch bounds how many events one transaction applies.
const maxBatch = 4096

// Options tune an [Engine].
type Options struct {
	Now  func() time.Time
	Rand func() float64 // backoff jitter in [0, 1)
	// Refs are the catalog lookups the service validates a submitted plan with ([Engine.Refs]);
	// nil checks structure only.
	Refs plan.Refs
	// AfterCommit runs on the engine goroutine after every commit that sealed runs, with
	// their ids (the service writes a checkpoint of orch.db then).
	AfterCommit func(ctx context.Context, sealed []string)
	// Observer, when set, sees every committed batch, lock wait and re-attach.
	Observer Observer
	// Queues are agora.yaml's queues and their concurrency (queues.go); nil: no queue
	// bounds anything.
	Queues map[string]int
	// Held, when set, is told how many tasks of open runs the engine holds in memory
	// whenever that changes: before a submitted or loaded run's tasks are built (the count
	// with them), before the commit that writes new tasks, and after one that sealed runs.
	// It is told on the engine goroutine, or in Open while it loads the open runs. Serve sets
	// its memory limit from it ([MemoryLimitFor]).
	Held func(tasks int)
}

// Engine runs plans. Create it with [Open], then call [Engine.Run] once.
type Engine struct {
	db    *store.DB
	log   *audit.Log
	exec  Executor
	opts  Options
	stmts stmts   // the commit's statements, prepared in Open, closed when Run returns
	args  []any   // a commit's statement arguments, reused (multirow.go)
	split []int32 // the rows of a multi-row write, plain first (splitPlain), reused
	// freeDetails are emptied details maps of committed batches (newDetails).
	freeDetails []map[string]any

	// The row log (rowlog.go, fold.go): the record being written, its plain values and its
	// bytes, reused; whether the current commit wrote a record; how many records wait, and
	// how many may before a commit folds the oldest; how many rows each waiting record
	// changes, oldest first, their sum, and how many may wait; whether a run was sealed since
	// the last fold.
	rec          logRecord
	recWire      rowlog.Record // rec as rowlog's plain values, reused
	logBuf       []byte
	folded       rowChanges          // what a fold reads back (fold.go), reused
	logNames     []string            // the record's runs column (logRuns), reused
	logNamed     map[string]struct{} // its names as a set
	logged       bool
	preApplied   map[string]struct{} // attempts a fold wrote ended before their end's record (fold.go preApply)
	unfolded     int
	foldBound    int // foldBound; tests lower it
	logRows      []int
	recRows      int // rows the current commit's record changes
	unfoldedRows int
	foldRows     int // foldRows; tests lower it
	sealed       bool
	foldTimer    *time.Timer
	foldIdle     time.Duration // foldIdle; tests raise it

	in      chan event
	stop    chan struct{}
	stopErr error // why a commit or fold stopped the engine; set before stop is closed

	// Everything below is owned by the Run goroutine.
	runs   map[string]*run
	byName map[string]*run
	locks  map[string]*lockState
	live   map[string]*task // dispatch id -> the task whose live attempt it is
	timers timers
	seq    int64
	held   int // tasks of the runs in runs
	told   int // held as Options.Held was last told it
	b      *batch
	spare  *batch    // the last batch committed, whose lists the next but one reuses
	began  time.Time // when the current batch took its first event (for the Observer)
	drain  int       // how many queued events one batch takes at most (maxBatch; tests lower it)

	// Scheduling work of the current batch.
	candidates []*task
	cascades   []cascade    // skip cascades waiting for the next batch (cascade.go)
	cancelling []cancelling // run cancels waiting for the next batch (cascade.go)
	unskips    []unskip     // retries' unskips waiting for the next batch (unskip.go)
	unskipping unskipRoots  // the unskips under way, by root (unskip.go)
	reattach   []*task      // running at load: re-attached when Run starts
	readied    []*task      // became ready in this batch
	wokenLocks map[*lockState]bool
	wokenRuns  map[*run]bool

	queues      map[string]*queueState // agora.yaml's queues and those open runs name (queues.go)
	wokenQueues map[*queueState]bool

	subMu sync.Mutex
	subs  map[string]map[chan api.Event]struct{}

	// specs holds the resolved tasks of every open run (run id -> runSpecs), immutable once
	// stored, so Status need not parse the plan again while the run is in memory.
	specs       sync.Map
	sealedSpecs []string // ids of sealed runs whose specs are still kept, oldest first
}

// keepSealedSpecs is how many sealed runs keep their specs in memory.
const keepSealedSpecs = 1

// runSpecs is what Status needs from a run's plan.
type runSpecs struct {
	concurrency int
	tasks       []*plan.Resolved // each task's spec, the one its task points to
	budget      budget.Budget
	queue       string
	added       []api.Added // why each task after the plan's was added, in order
}

// event is anything the loop applies.
type event interface{}

type completion struct{ o Outcome }

type submitCmd struct {
	p              *plan.Plan
	repo, revision string
	workspace      string
	subagents      map[string]string // the plan's bare subagent names, pinned at submit
	newRun         bool              // start a new run even when one of the same identity exists
	actor          string
	trace          Trace
	reply          chan submitResult
	slot           *Slot // a schedule's slot: the run's id is chosen (scheduled.go)
}

type submitResult struct {
	runID   string
	created bool
	why     string // why a new run was made although a run like it exists; "" otherwise
	err     error
}

type actionCmd struct {
	kind  string // cancel, answer, retry, seal
	req   api.ActionRequest
	reply chan error
}

// ErrNotFound is matched by errors for unknown runs and tasks.
var ErrNotFound = errors.New("not found")

// ErrConflict is matched by errors for commands the current state refuses.
var ErrConflict = errors.New("conflict")

// ErrStopped means the engine is not running.
var ErrStopped = errors.New("orchestrator engine stopped")

// Open loads every run that is not sealed from db and returns an engine ready to [Engine.Run].
func Open(ctx context.Context, db *store.DB, log *audit.Log, exec Executor, opts Options) (*Engine, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Rand == nil {
		opts.Rand = mrand.Float64
	}
	e := &Engine{
		// The engine's appends store the audit tree sparsely: a node row per eight entries
		// instead of one per entry, the lower nodes computed from the leaves when read.
		db: db, log: log.SparseTree(), exec: exec, opts: opts,
		in: make(chan event, maxBatch), stop: make(chan struct{}),
		runs: map[string]*run{}, byName: map[string]*run{}, locks: map[string]*lockState{}, live: map[string]*task{},
		subs:       map[string]map[chan api.Event]struct{}{},
		wokenLocks: map[*lockState]bool{}, wokenRuns: map[*run]bool{},
		queues: map[string]*queueState{}, wokenQueues: map[*queueState]bool{},
		drain: maxBatch, foldIdle: foldIdle, foldBound: foldBound, foldRows: foldRows, preApplied: map[string]struct{}{},
	}
	e.b = newBatch()
	if err := e.stmts.prepare(ctx, db.SQL()); err != nil {
		return nil, fmt.Errorf("orchestrator: prepare statements: %w", err)
	}
	// The runs are loaded from the tables: every record of the row log is folded first (the
	// records a crash left are exactly the commits it made).
	if err := e.fold(ctx, 0); err != nil {
		e.stmts.close()
		return nil, err
	}
	if err := e.load(ctx); err != nil {
		e.stmts.close()
		return nil, err
	}
	return e, nil
}

// Run applies events until ctx ends or a commit fails. After a failed commit the in-memory
// state is ahead of the database, so the engine stops; a restart reloads the durable state.
func (e *Engine) Run(ctx context.Context) error {
	defer close(e.stop)
	defer e.stmts.close()
	e.tellHeld() // the runs load left
	err := e.loop(ctx)
	if err != nil {
		// A fold that failed (a fenced or broken orch.db) stops the engine as a failed commit
		// does; the commands still queued hear why, and so does every later one.
		e.failPending(err)
		e.stopErr = err
	}
	return err
}

// stopped is what a command hears once the engine has stopped: [ErrStopped], and why when a
// commit or fold stopped it. Read only after stop is closed (Run sets stopErr before).
func (e *Engine) stopped() error {
	if e.stopErr != nil {
		return fmt.Errorf("%w: %w", ErrStopped, e.stopErr)
	}
	return ErrStopped
}

// await waits for a command's reply. The engine answers every command it took before Run
// returns, so once stop is closed a reply that is not there never comes: a command that
// reached the queue after the engine drained it hears that the engine stopped, and why,
// rather than waiting for ctx.
func await[T any](ctx context.Context, e *Engine, reply <-chan T) (T, error) {
	var zero T
	select {
	case r := <-reply:
		return r, nil
	case <-e.stop:
		select {
		case r := <-reply:
			return r, nil
		default:
			return zero, e.stopped()
		}
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// loop is Run's: it applies events until ctx ends or a commit or fold fails.
func (e *Engine) loop(ctx context.Context) error {
	e.foldTimer = time.NewTimer(time.Hour)
	defer e.foldTimer.Stop()
	e.resume(ctx)
	if err := e.flush(ctx); err != nil {
		return err
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		var foldC <-chan time.Time
		if e.unfolded > 0 {
			foldC = e.foldTimer.C
		}
		var timerC <-chan time.Time
		if len(e.timers) > 0 {
			d := e.timers[0].retryAt.Sub(e.opts.Now())
			if d < 0 {
				d = 0
			}
			timer.Reset(d)
			timerC = timer.C
		}
		if e.sweeping() {
			// A cascade or a run's cancel goes on first, with whatever events came meanwhile after it; a stop
			// leaves the rest to the next Open (load's resumeCascades).
			if ctx.Err() != nil {
				e.failPending(ErrStopped)
				return e.fold(ctx, 0)
			}
			e.markBegan()
			e.continueCascades()
		} else {
			select {
			case <-ctx.Done():
				e.failPending(ErrStopped)
				// What other packages read of the tables is up to date once Run returns.
				return e.fold(ctx, 0)
			case <-foldC:
				if err := e.foldWhileIdle(ctx); err != nil {
					return err
				}
				continue
			case ev := <-e.in:
				e.markBegan()
				e.apply(ev)
			case <-timerC:
				e.markBegan()
			}
		}
	drain:
		for i := 0; i < e.drain; i++ {
			select {
			case ev := <-e.in:
				e.apply(ev)
			default:
				break drain
			}
		}
		e.dueTimers()
		if err := e.flush(ctx); err != nil {
			return err
		}
		if err := e.afterFlush(ctx); err != nil {
			return err
		}
	}
}

// failPending answers every command still queued.
func (e *Engine) failPending(err error) {
	for {
		select {
		case ev := <-e.in:
			switch c := ev.(type) {
			case submitCmd:
				c.reply <- submitResult{err: err}
			case actionCmd:
				c.reply <- err
			}
		default:
			return
		}
	}
}

func (e *Engine) apply(ev event) {
	switch c := ev.(type) {
	case completion:
		e.complete(c.o)
	case submitCmd:
		e.submit(c)
	case actionCmd:
		e.action(c)
	case statsCmd:
		c.reply <- e.stats()
	case queuesCmd:
		c.reply <- e.queueStats()
	}
}

// tellHeld tells Options.Held how many tasks the engine holds, when that changed.
func (e *Engine) tellHeld() {
	if e.opts.Held != nil && e.held != e.told {
		e.told = e.held
		e.opts.Held(e.held)
	}
}

// tellHeldAhead tells Options.Held of n tasks more than the engine holds, when that is more
// than it was last told: a run of n tasks is about to be built.
func (e *Engine) tellHeldAhead(n int) {
	if e.opts.Held != nil && e.held+n > e.told {
		e.told = e.held + n
		e.opts.Held(e.told)
	}
}

// flush schedules, commits the batch, then fires what it decided and answers the callers.
func (e *Engine) flush(ctx context.Context) error {
	e.schedule()
	e.recordReady()
	e.tellHeld() // also after a submission told ahead that made no run
	b := e.b
	if b.empty() {
		return nil
	}
	if e.spare != nil {
		e.b, e.spare = e.spare.reuse(), nil
	} else {
		e.b = newBatch()
	}
	t0 := time.Now()
	if err := e.commit(ctx, b); err != nil {
		for _, r := range b.replies {
			r(err)
		}
		return fmt.Errorf("orchestrator: commit: %w", err)
	}
	if o := e.opts.Observer; o != nil {
		began := e.began
		if began.IsZero() {
			began = t0
		}
		o.Committed(Batch{Entries: b.entries, Began: began, Commit: time.Since(t0)})
	}
	e.began = time.Time{}
	for _, r := range e.runs {
		if r.sealed {
			delete(e.runs, r.id)
			e.held -= len(r.tasks)
			if e.byName[r.name] == r {
				delete(e.byName, r.name)
			}
			// Keep the specs of the last sealed run: their watchers and exporters read
			// their status right after the seal, and parsing a large plan again is costly.
			e.sealedSpecs = append(e.sealedSpecs, r.id)
			if len(e.sealedSpecs) > keepSealedSpecs {
				e.specs.Delete(e.sealedSpecs[0])
				e.sealedSpecs = e.sealedSpecs[1:]
			}
		}
	}
	e.tellHeld()
	for _, a := range b.fires {
		e.exec.Start(ctx, a, e.done)
	}
	for _, id := range b.cancels {
		e.exec.Cancel(ctx, id)
	}
	e.publish(b.events)
	for _, r := range b.replies {
		r(nil)
	}
	e.sealed = e.sealed || len(b.sealed) > 0
	if len(b.sealed) > 0 && e.opts.AfterCommit != nil {
		e.opts.AfterCommit(ctx, b.sealed)
	}
	e.recycleDetails(b)
	e.spare = b
	return nil
}

// markBegan notes when a batch took its first event, only when an Observer wants it.
func (e *Engine) markBegan() {
	if e.opts.Observer != nil && e.began.IsZero() {
		e.began = time.Now()
	}
}

// done is the completion callback handed to the executor.
func (e *Engine) done(o Outcome) {
	select {
	case e.in <- completion{o}:
	case <-e.stop:
	}
}

// send queues a command, failing when the engine has stopped.
func (e *Engine) send(ctx context.Context, ev event) error {
	select {
	case e.in <- ev:
		return nil
	case <-e.stop:
		return e.stopped()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Checkout is what a run works on, pinned at submit: a workspace version (name@sha256:HEX)
// or a repository path, and a commit id. All empty: every task gets an empty workspace.
type Checkout struct {
	Workspace, Repo, Revision string
	// Subagents pins the plan's subagent names written without a version (NAME) to the
	// versions they named at submit (NAME@sha256:HEX), by the name as written: every task,
	// item, reviewer and fix of the run dispatches that version, and the pins are part of the
	// run's identity. nil: nothing to pin (every reference is pinned already, or the service
	// has no catalog).
	Subagents map[string]string
	// NewRun starts a new run even when a run of the same identity exists.
	NewRun bool
	// Trace places the run in a trace; zero: none.
	Trace Trace
}

// Submission is how a submit ended: the run, whether it was made now, and why a new run was
// made although a run of the same name, plan and checkout exists ("" when none does, or the
// existing run was returned).
type Submission struct {
	RunID   string
	Created bool
	Why     string
}

// Trace is a run's place in a trace, W3C ids in hex: the trace, the run span's own id and
// the traceparent of the caller's span it joined ("" for a root). The service chooses it at
// submit; the engine records it and hands it to its Observer in the run.submitted entry.
type Trace struct {
	ID, Span, Parent string
}

// Submit starts a run of p on co, or returns the existing run of the same identity (name,
// plan digest and co) with created false. The plan must already be validated against the
// catalog ([plan.Validate] with [Engine.Refs], as the service does, so structure and catalog
// problems come back together); Submit looks nothing up again.
func (e *Engine) Submit(ctx context.Context, p *plan.Plan, co Checkout, actor string) (runID string, created bool, err error) {
	s, err := e.SubmitRun(ctx, p, co, actor)
	return s.RunID, s.Created, err
}

// SubmitRun is [Engine.Submit] that also says why a new run was made when a run of the same
// name, plan and checkout exists: its subagents' versions changed, or co.NewRun asked for one.
func (e *Engine) SubmitRun(ctx context.Context, p *plan.Plan, co Checkout, actor string) (Submission, error) {
	reply := make(chan submitResult, 1)
	if err := e.send(ctx, submitCmd{p: p, workspace: co.Workspace, repo: co.Repo, revision: co.Revision, subagents: co.Subagents,
		newRun: co.NewRun, actor: actor, trace: co.Trace, reply: reply}); err != nil {
		return Submission{}, err
	}
	r, err := await(ctx, e, reply)
	if err != nil {
		return Submission{}, err
	}
	return Submission{RunID: r.runID, Created: r.created, Why: r.why}, r.err
}

// Refs are the catalog lookups plans are validated with at submit (nil: none).
func (e *Engine) Refs() plan.Refs { return e.opts.Refs }

// Cancel cancels a run, or one task of it (and skips its dependents).
func (e *Engine) Cancel(ctx context.Context, req api.ActionRequest) error {
	return e.do(ctx, "cancel", req)
}

// Answer gives a task that needs input its answer; a new attempt resumes it.
func (e *Engine) Answer(ctx context.Context, req api.ActionRequest) error {
	return e.do(ctx, "answer", req)
}

// Retry makes a failed task ready again and its skipped dependents pending.
func (e *Engine) Retry(ctx context.Context, req api.ActionRequest) error {
	return e.do(ctx, "retry", req)
}

// Seal closes a finished run for good: no later write may touch it.
func (e *Engine) Seal(ctx context.Context, req api.ActionRequest) error {
	return e.do(ctx, "seal", req)
}

func (e *Engine) do(ctx context.Context, kind string, req api.ActionRequest) error {
	reply := make(chan error, 1)
	if err := e.send(ctx, actionCmd{kind: kind, req: req, reply: reply}); err != nil {
		return err
	}
	err, stopped := await(ctx, e, reply)
	if stopped != nil {
		return stopped
	}
	return err
}

// newID returns a ULID, the same form as dispatch ids.
func (e *Engine) newID() string {
	return ulid.MustNew(ulid.Timestamp(e.opts.Now()), rand.Reader).String()
}
