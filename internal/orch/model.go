package orch

import (
	"time"

	"github.com/agora-dev/agora/internal/orch/plan"
)

// run is the in-memory state of a run that is not sealed.
type run struct {
	id, name, digest string
	canonical        []byte
	actor            string
	repo, revision   string
	workspace        string // name@sha256:HEX, "" for none
	concurrency      int
	createdAt        time.Time
	endedAt          time.Time
	state            string
	cancelRequested  bool
	sealed           bool
	tasks            []*task
	byID             map[string]*task
	counts           map[string]int
	running          int
	waiting          queue // ready tasks waiting for a run slot
	backoff          int   // pending tasks waiting out a retry backoff
	entries          int   // audit entries recorded about the run (the seal states the count)
	inserted         bool  // the run row does not exist yet
}

// task is one node of a run.
type task struct {
	run        *run
	idx        int
	spec       plan.Resolved
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
}

// lockReq is one lock a task needs.
type lockReq struct {
	l      *lockState
	shared bool
}
