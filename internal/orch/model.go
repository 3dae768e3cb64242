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
	byID            map[string]*task
	counts          map[string]int
	running         int
	waiting         queue         // ready tasks waiting for a run slot
	backoff         int           // pending tasks waiting out a retry backoff
	entries         int           // audit entries recorded about the run (the seal states the count)
	inserted        bool          // the run row does not exist yet
	budget          budget.Budget // the plan's run budget; zero: none
	usage           budget.Usage  // the sum of the ended attempts' usage
	planTasks       int           // tasks of the plan; those after them were added (extend.go)
	exts            int           // extensions applied, the next one's sequence number
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

// task is one node of a run.
type task struct {
	run        *run
	idx        int
	spec       *plan.Resolved // an element of the run's specs (engine.go), shared, never written
	deps       []*task
	dependents []*task
	locks      []lockReq

	state      string
	attempts   int
	failures   int
	dispatchID string
	readySeq   int64
	retryAt    time.Time
	reason     string
	detail     string
	question   string
	answer     string
	parentID   string // the needs_input dispatch the next attempt answers
	cancel     bool   // a cancel was asked while it ran

	unmet int // dependencies not yet succeeded

	// queue bookkeeping: at most one queue holds a task.
	inQueue *queue
	qidx    int
	// timer bookkeeping
	timerIdx int

	dirty           bool // written in the current batch
	readyUnrecorded bool // became ready in this batch; no ready entry yet
	fresh           bool // added in the current batch: its row is inserted, not updated

	*ext // run extension (extend.go): noExt until the task has links of its own (own)
}

// lockReq is one lock a task needs.
type lockReq struct {
	l      *lockState
	shared bool
}
