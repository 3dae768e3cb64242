package orch

import (
	"github.com/agora-dev/agora/internal/budget"
	"time"

	"github.com/agora-dev/agora/internal/orch/plan"
)

// run is the in-memory state of a run that is not sealed.
type run struct {
	id, name, digest string
	canonical        []byte // the plan as run_plans keeps it, until the run's row is written
	actor            string
	repo, revision   string
	workspace        string // name@sha256:HEX, "" for none
	// subagents pins the plan's bare subagent names to versions (Checkout.Subagents); pins
	// is its canonical JSON, as the runs row keeps it ("" for none).
	subagents       map[string]string
	pins            string
	trace           Trace
	concurrency     int
	q               *queueState // the queue its tasks take slots from
	slot            Slot        // the schedule's slot it runs for; zero: none
	createdAt       time.Time
	endedAt         time.Time
	state           string
	cancelRequested bool
	sealed          bool
	tasks           []*task
	byID            map[string]*task // tasks by id, built by task on first use; nil until then
	counts          map[string]int
	running         int
	waiting         queue         // ready tasks waiting for a run slot
	backoff         int           // pending tasks waiting out a retry backoff
	cascading       int           // its cascades and cancel waiting for the next batch (cascade.go)
	entries         int           // audit entries recorded about the run (the seal states the count)
	inserted        bool          // the run row does not exist yet
	budget          budget.Budget // the plan's run budget; zero: none
	usage           budget.Usage  // the sum of the ended attempts' usage
	planTasks       int           // tasks of the plan; those after them were added (extend.go)
	exts            int           // extensions applied, the next one's sequence number
}

// task is r's task called id, or nil. Its index by id is built on first use and kept from
// then on: a run whose tasks have no needs, bases, fan-outs or extensions and is not
// addressed task by task never builds it, which at 100,000 tasks is several MB.
func (r *run) task(id string) *task {
	if r.byID == nil {
		r.byID = make(map[string]*task, len(r.tasks))
		for _, t := range r.tasks {
			r.byID[t.spec.ID] = t
		}
	}
	return r.byID[id]
}

// subagent is the version a task of r dispatches for ref as its plan writes it: the pin of
// a bare name, else ref itself.
func (r *run) subagent(ref string) string {
	if v, ok := r.subagents[ref]; ok {
		return v
	}
	return ref
}

// budgetSpent says why r's budget allows no further task, or "".
func (r *run) budgetSpent() string {
	if r.budget.IsZero() {
		return ""
	}
	return r.budget.Spent(r.usage)
}

// remaining is what is left of r's budget, field by field (a field r does not limit stays 0).
func (r *run) remaining() budget.Budget {
	b := r.budget
	if b.Tokens != 0 {
		b.Tokens = max(b.Tokens-r.usage.Tokens(), 1)
	}
	if b.ModelCalls != 0 {
		b.ModelCalls = max(b.ModelCalls-r.usage.ModelCalls, 1)
	}
	if b.USD != 0 {
		b.USD = max(b.USD-r.usage.CostUSD, 1e-9)
	}
	return b
}

// task is one node of a run. A run of 100,000 tasks keeps 100,000 of them for as long as
// it is open, so a node holds what every task uses and points to what few do: the state
// few tasks ever have in [rare], the links of extensions in [ext], each shared by every task
// that has none of its own. The fields are ordered so that the node fills a 192-byte size
// class with nothing to spare.
type task struct {
	run        *run
	spec       *plan.Resolved // an element of the run's specs (engine.go), shared, never written
	deps       []*task
	dependents []*task
	locks      []lockReq

	state      string
	dispatchID string
	attempts   int
	failures   int
	readySeq   int64
	idx        int

	// queue bookkeeping: at most one queue holds a task.
	inQueue *queue

	*ext  // run extension (extend.go): noExt until the task has links of its own (own)
	*rare // noRare until the task holds one of its fields (the set methods)

	unmet    int32 // dependencies not yet succeeded
	qidx     int32 // its place in inQueue's heap
	timerIdx int32 // its place in the engine's timers

	cancel          bool // a cancel was asked while it ran
	dirty           bool // written in the current batch
	readyUnrecorded bool // became ready in this batch; no ready entry yet
	fresh           bool // added in the current batch: its row is inserted, not updated
}

// rare is what a task holds only on some paths: why it ended as it did, a retry's time, a
// question and its answer. A task that holds none shares noRare, so the tasks of a run that
// goes well pay a pointer for them, not 104 bytes each.
type rare struct {
	retryAt  time.Time
	reason   string
	detail   string
	question string
	answer   string
	parentID string // the needs_input dispatch the next attempt answers
}

// noRare is the rare fields of every task that holds none. It is never written: every write
// goes through a set method (TestMain checks it is still empty after every test).
var noRare = &rare{}

// ownRare is t's rare fields to write: its own, made from noRare the first time.
func (t *task) ownRare() *rare {
	if t.rare == noRare {
		t.rare = &rare{}
	}
	return t.rare
}

// releaseRare shares noRare again once t holds none of its rare fields.
func (t *task) releaseRare() {
	if t.rare != noRare && *t.rare == (rare{}) {
		t.rare = noRare
	}
}

// setReason sets why t is in its state, and its detail.
func (t *task) setReason(reason, detail string) {
	if t.rare == noRare && reason == "" && detail == "" {
		return
	}
	r := t.ownRare()
	r.reason, r.detail = reason, detail
	t.releaseRare()
}

// setRetryAt sets when t's backoff ends; zero: it waits for none.
func (t *task) setRetryAt(at time.Time) {
	if t.rare == noRare && at.IsZero() {
		return
	}
	t.ownRare().retryAt = at
	t.releaseRare()
}

// setQuestion sets the question t's latest attempt asked.
func (t *task) setQuestion(q string) {
	if t.rare == noRare && q == "" {
		return
	}
	t.ownRare().question = q
	t.releaseRare()
}

// setAnswer sets the answer t's next attempt carries.
func (t *task) setAnswer(a string) {
	if t.rare == noRare && a == "" {
		return
	}
	t.ownRare().answer = a
	t.releaseRare()
}

// setParent sets the needs_input dispatch t's next attempt answers.
func (t *task) setParent(id string) {
	if t.rare == noRare && id == "" {
		return
	}
	t.ownRare().parentID = id
	t.releaseRare()
}

// lockReq is one lock a task needs.
type lockReq struct {
	l      *lockState
	shared bool
}
