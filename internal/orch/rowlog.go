package orch

import (
	"slices"

	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/rowlog"
)

// The task and attempt rows are written as a log (docs/ARCHITECTURE.md "orch.db"): each
// commit stores its batch's row changes as one binary record in row_log, with the batch's
// audit entries, instead of a task update, an attempt insert and an attempt end per task.
// The tasks and attempts tables are brought up to date from the log later, when the engine
// is idle (fold.go); every reader reads the tables and the records not yet folded in one
// read transaction (overlay.go). A record holds whole row images, never deltas, so applying
// the records in order is the same as having run the statements they replace.

// logRecord is one batch's row changes, in the order the statements ran; rowlog holds its
// binary form.
type logRecord struct {
	tasks   []taskImage    // task rows updated: every column an update writes
	inserts []attemptImage // attempts fired: their rows as inserted ('live')
	ends    []endImage     // attempts ended
}

// endImage is an attempt's end: the columns it sets.
type endImage struct {
	id, state, reason, endedAt, usage, verdict string
}

// taskImage is a task row's updatable columns as of the batch.
type taskImage struct {
	runID      string
	idx        int
	state      string
	attempts   int
	failures   int
	dispatchID string
	readySeq   int64
	retryAt    string // ts form, "" for none
	reason     string
	detail     string
	question   string
	answer     string
	cancel     bool
	review     string
}

// plain says whether t's optional columns hold their defaults: the plain update writes it
// (multirow.go).
func (t *taskImage) plain() bool {
	return t.retryAt == "" && t.reason == "" && t.detail == "" && t.question == "" && t.answer == "" && !t.cancel && t.review == ""
}

// attemptImage is an attempt row: as inserted (state live) or, in an overlay, as ended.
type attemptImage struct {
	dispatchID, runID string
	taskIdx, number   int
	state, reason     string
	parentID, inputs  string
	firedAt, endedAt  string
	usage, verdict    string
}

// errLogRecord is wrapped by every decoding error: a record that does not decode is a
// damaged orch.db, never skipped.
var errLogRecord = rowlog.ErrDamaged

// encodeWith is encode with w's lists reused for the plain values: the engine keeps one w,
// so a commit allocates nothing for its record but what the lists grow by.
func (r *logRecord) encodeWith(dst []byte, w *rowlog.Record) []byte {
	w.Tasks, w.Inserts, w.Ends = slices.Grow(w.Tasks[:0], len(r.tasks))[:len(r.tasks)],
		slices.Grow(w.Inserts[:0], len(r.inserts))[:len(r.inserts)], slices.Grow(w.Ends[:0], len(r.ends))[:len(r.ends)]
	for i, t := range r.tasks {
		w.Tasks[i] = rowlog.Task{RunID: t.runID, Idx: t.idx, State: t.state, Attempts: t.attempts, Failures: t.failures, DispatchID: t.dispatchID,
			ReadySeq: t.readySeq, RetryAt: t.retryAt, Reason: t.reason, Detail: t.detail, Question: t.question, Answer: t.answer,
			Cancel: t.cancel, Review: t.review}
	}
	for i, a := range r.inserts {
		w.Inserts[i] = rowlog.Attempt{DispatchID: a.dispatchID, RunID: a.runID, TaskIdx: a.taskIdx, Number: a.number,
			ParentID: a.parentID, Inputs: a.inputs, FiredAt: a.firedAt}
	}
	for i, x := range r.ends {
		w.Ends[i] = rowlog.End{ID: x.id, State: x.state, Reason: x.reason, EndedAt: x.endedAt, Usage: x.usage, Verdict: x.verdict}
	}
	return w.Encode(dst)
}

// taskFromWire is a decoded task row image.
func taskFromWire(t *rowlog.Task) taskImage {
	return taskImage{runID: t.RunID, idx: t.Idx, state: t.State, attempts: t.Attempts, failures: t.Failures, dispatchID: t.DispatchID,
		readySeq: t.ReadySeq, retryAt: t.RetryAt, reason: t.Reason, detail: t.Detail, question: t.Question, answer: t.Answer,
		cancel: t.Cancel, review: t.Review}
}

// attemptFromWire is a decoded fired attempt: its row as inserted, live.
func attemptFromWire(a *rowlog.Attempt) attemptImage {
	return attemptImage{dispatchID: a.DispatchID, runID: a.RunID, taskIdx: a.TaskIdx, number: a.Number, state: lifecycle.AttemptLive,
		parentID: a.ParentID, inputs: a.Inputs, firedAt: a.FiredAt}
}

// endFromWire is a decoded attempt end.
func endFromWire(x *rowlog.End) endImage {
	return endImage{id: x.ID, state: x.State, reason: x.Reason, endedAt: x.EndedAt, usage: x.Usage, verdict: x.Verdict}
}

// plain says whether a's optional columns hold their defaults: the plain insert writes it
// (multirow.go).
func (a *attemptImage) plain() bool {
	return a.reason == "" && a.parentID == "" && a.usage == "" && a.verdict == ""
}
