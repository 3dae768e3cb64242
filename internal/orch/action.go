package orch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/errclass"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/api"
)

var timeZero time.Time

// maxAnswer caps an answer to a task that needs input.
const maxAnswer = 64 << 10

// action applies cancel, answer, retry or seal.
func (e *Engine) action(c actionCmd) {
	r, t, err := e.target(c.req)
	if err == nil {
		switch c.kind {
		case "cancel":
			err = e.cancel(r, t, c.req.Actor)
		case "answer":
			err = e.answer(r, t, c.req)
		case "retry":
			err = e.retry(r, t, c.req.Actor)
		case "seal":
			err = e.sealCmd(r, c.req.Actor)
		default:
			err = fmt.Errorf("unknown action %q", c.kind)
		}
	}
	if err != nil {
		c.reply <- err
		return
	}
	e.settle(r)
	reply := c.reply
	e.b.replies = append(e.b.replies, func(err error) { reply <- err })
}

// target finds the run (and task) a command names.
func (e *Engine) target(req api.ActionRequest) (*run, *task, error) {
	r, ok := e.runRef(req.Run)
	if !ok {
		var state string
		err := e.db.SQL().QueryRow(`SELECT state FROM runs WHERE id = ? OR name = ?
			ORDER BY id = ? DESC, created_at DESC, id DESC LIMIT 1`, req.Run, req.Run, req.Run).Scan(&state)
		if err == nil {
			return nil, nil, fmt.Errorf("%w: run %s is sealed (%s); a sealed run accepts no further changes", ErrConflict, req.Run, state)
		}
		return nil, nil, runNotFound(context.Background(), e.db.SQL(), req.Run)
	}
	if req.Task == "" {
		return r, nil, nil
	}
	t := r.task(req.Task)
	if t == nil {
		return nil, nil, &errclass.NotFoundError{Kind: "task", ID: req.Task, In: "run " + r.id, Known: taskIDs(r), Of: ErrNotFound}
	}
	return r, t, nil
}

func taskIDs(r *run) []string {
	ids := make([]string, 0, len(r.tasks))
	for _, t := range r.tasks {
		ids = append(ids, t.spec.ID)
	}
	return ids
}

func (e *Engine) cancel(r *run, t *task, actor string) error {
	if r.cancelRequested {
		return nil
	}
	if t == nil {
		if lifecycle.RunEnded(r.state) {
			return fmt.Errorf("%w: run %s already ended %s", ErrConflict, r.id, r.state)
		}
		r.cancelRequested = true
		e.record(r, nil, entry.RunCancelRequested, map[string]any{entry.KeyBy: actor})
		e.cancelTasks(cancelling{r: r}) // cascadeBatch a batch (cascade.go)
		return nil
	}
	if lifecycle.TaskEnded(t.state) {
		return fmt.Errorf("%w: task %s already ended %s", ErrConflict, t.spec.ID, t.state)
	}
	e.record(r, t, entry.TaskCancelRequested, map[string]any{entry.KeyBy: actor})
	e.cancelTask(t)
	if t.state == lifecycle.TaskCancelled {
		e.skipDependents(t, lifecycle.TaskCancelled)
	}
	e.cancelAdded(t)
	if t.role != "" && lifecycle.TaskEnded(t.state) {
		e.ownedEnded(t)
	}
	return nil
}

// cancelTask stops t: at once when it is not running, through its dispatch when it is.
func (e *Engine) cancelTask(t *task) {
	switch t.state {
	case lifecycle.TaskPending, lifecycle.TaskReady, lifecycle.TaskNeedsInput:
		unqueue(t)
		e.stopTimer(t)
		t.setReason(lifecycle.ReasonCancelled, t.detail)
		e.set(t, lifecycle.TaskCancelled)
		e.record(t.run, t, entry.TaskCancelled, nil)
	case lifecycle.TaskRunning:
		if !t.cancel {
			t.cancel = true
			e.touch(t)
			e.b.cancels = append(e.b.cancels, t.dispatchID)
		}
	}
}

func (e *Engine) answer(r *run, t *task, req api.ActionRequest) error {
	if t == nil {
		return fmt.Errorf("%w: answer needs a task", ErrConflict)
	}
	if t.state != lifecycle.TaskNeedsInput {
		return fmt.Errorf("%w: task %s is %s; only a task that needs input takes an answer", ErrConflict, t.spec.ID, t.state)
	}
	if r.cancelRequested {
		return fmt.Errorf("%w: run %s is cancelled", ErrConflict, r.id)
	}
	if len(req.Answer) > maxAnswer {
		return fmt.Errorf("answer is %d bytes, over the %d-byte limit", len(req.Answer), maxAnswer)
	}
	t.setAnswer(req.Answer)
	sum := sha256.Sum256([]byte(req.Answer))
	e.record(r, t, entry.TaskAnswered, map[string]any{entry.KeyBy: req.Actor, "answers": t.parentID, "answer_sha256": hex.EncodeToString(sum[:])})
	e.becomeReady(t)
	return nil
}

func (e *Engine) retry(r *run, t *task, actor string) error {
	if t == nil {
		return fmt.Errorf("%w: retry needs a task", ErrConflict)
	}
	if r.cancelRequested {
		return fmt.Errorf("%w: run %s was cancelled; a cancelled run is never fired again", ErrConflict, r.id)
	}
	if t.state != lifecycle.TaskFailed && t.state != lifecycle.TaskCancelled {
		return fmt.Errorf("%w: task %s is %s; only a failed or cancelled task can be retried", ErrConflict, t.spec.ID, t.state)
	}
	if why := notRetryable(t); why != "" {
		return fmt.Errorf("%w: task %s %s", ErrConflict, t.spec.ID, why)
	}
	// A task that would wait for a dependency that never succeeds is refused: it could never
	// fire, and no pending task waits on a dead one (load reads that as a cut cascade,
	// cascade.go).
	for _, d := range t.deps {
		if root := deadCause(d, map[*task]*task{}); root != nil {
			return fmt.Errorf("%w: task %s depends on %s, which %s (task %s %s); retry %s first", ErrConflict, t.spec.ID, d.spec.ID, d.state,
				root.spec.ID, root.state, root.spec.ID)
		}
	}
	t.failures, t.cancel = 0, false
	t.setReason("", "")
	e.record(r, t, entry.TaskRetried, map[string]any{entry.KeyBy: actor})
	t.unmet = 0
	for _, x := range t.deps {
		if x.state != lifecycle.TaskSucceeded {
			t.unmet++
		}
	}
	if t.unmet == 0 {
		e.becomeReady(t)
	} else {
		e.set(t, lifecycle.TaskPending)
	}
	// Then the dependents skipped because of t become pending again, unless another
	// ancestor of theirs still failed (unskip.go).
	e.unskipDependents(t)
	return nil
}

func (e *Engine) sealCmd(r *run, actor string) error {
	if r.sealed {
		return nil
	}
	if !lifecycle.RunEnded(r.state) {
		return fmt.Errorf("%w: run %s is %s; only a run that ended can be sealed", ErrConflict, r.id, r.state)
	}
	e.record(r, nil, entry.RunSealRequested, map[string]any{entry.KeyBy: actor})
	e.seal(r)
	return nil
}
