package orch

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/jcs"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// Fix loops: a task T with on_fail.fix owns a loop. Its work, and each fix's, is a candidate
// judged by T's gates; a rejected candidate adds T.fix-N (the next fix, bounded by
// max_attempts) given the rejected patch and the reasons, while T stays pending
// ("awaiting-fix") and its dependents wait. The first accepted candidate makes T succeed,
// its product the products T's dependents receive; a rejected fix is `rejected` (its work was
// superseded), and when the loop is spent T fails naming the last reasons.

// loopOf is the task whose loop candidate c belongs to: c itself, or the task a fix fixes.
func loopOf(c *task) *task {
	if c.role == causeFix {
		return c.by
	}
	return c
}

// productID is the dispatch whose products t's dependents receive: the fix t succeeded with,
// else t's own latest attempt.
func (t *task) productID() string {
	if t.product != nil {
		return t.product.productID()
	}
	return t.dispatchID
}

// accept ends candidate c succeeded; when c is a fix, the task it fixes succeeds with it.
// What c awaited (awaiting-review, and its reviewers in the detail) is over: it is cleared
// with the state, so the status, orch.db and a reloaded run show no stale reason.
func (e *Engine) accept(c *task, details map[string]any) {
	c.setReason("", "")
	e.succeed(c, details, Outcome{})
	if c.role != causeFix {
		return
	}
	t := c.by
	if t.state != lifecycle.TaskPending {
		return // cancelled meanwhile
	}
	t.own().product = c
	t.setReason("", "")
	e.succeed(t, map[string]any{"fixed_by": c.spec.ID, "product": c.productID(), "fixes": int64(len(t.fixes))}, Outcome{})
}

// succeed ends t succeeded: its fan-outs are added, its dependents released.
func (e *Engine) succeed(t *task, details map[string]any, o Outcome) {
	e.set(t, lifecycle.TaskSucceeded)
	e.record(t.run, t, entry.TaskSucceeded, details)
	if len(t.fanOuts) > 0 && !t.run.cancelRequested {
		e.fanOut(t, o)
	}
	e.release(t)
}

// release counts t's success toward each dependent, making ready (or done, for a fan-out)
// every one whose dependencies have all succeeded.
func (e *Engine) release(t *task) {
	if t.run.cancelRequested {
		return
	}
	for _, d := range t.dependents {
		if d.state != lifecycle.TaskPending {
			continue
		}
		d.unmet--
		if d.unmet == 0 && d.retryAt.IsZero() {
			e.becomeReady(d)
		}
	}
}

// reject judges candidate c's work red for reason: the loop's next fix is added, or, when
// there is no loop or it is spent, the loop's task fails naming the reasons.
func (e *Engine) reject(c *task, reason string, reasons []string, details map[string]any) {
	t := loopOf(c)
	reasons = capReasons(reasons)
	detail := strings.Join(reasons, "; ")
	if details == nil {
		// Not the attempt's end (that was orch.task.produced): the work it judged.
		details = map[string]any{entry.KeyAttempt: int64(c.attempts), "judged_dispatch": c.dispatchID}
	}
	details[entry.KeyReason], details["reasons"] = reason, anyStrings(reasons)
	if c != t {
		c.setReason(reason, detail)
		e.set(c, lifecycle.TaskRejected)
		e.record(c.run, c, entry.TaskRejected, details)
	}
	if t.state != lifecycle.TaskPending && t != c {
		return // the loop's task was cancelled meanwhile
	}
	if f := t.spec.OnFail; f != nil && f.Fix != nil && len(t.fixes) < f.Fix.MaxAttempts {
		n := len(t.fixes) + 1
		row := extRow{Cause: causeFix, Task: t.spec.ID, Data: mustJCS(fixData{N: n, From: c.spec.ID, FromDispatch: c.dispatchID, Reasons: reasons})}
		if c == t {
			// The judgment before its effect: the red work is rejected (its entry naming its
			// dispatch) before the orch.run.extended entry of the fix it causes.
			t.setReason(lifecycle.ReasonAwaitingFix, detail)
			e.set(t, lifecycle.TaskPending)
			e.record(t.run, t, entry.TaskRejected, details)
		}
		added, err := e.extend(t.run, t, row, c.dispatchID)
		if err == nil && len(added) == 1 {
			t.setReason(lifecycle.ReasonAwaitingFix, added[0].spec.ID+" fixes: "+detail)
			e.set(t, lifecycle.TaskPending)
			e.becomeReady(added[0])
			return
		}
		if err != nil {
			detail += "; its fix could not be added: " + err.Error()
		}
	}
	if len(t.fixes) > 0 {
		reason, detail = lifecycle.ReasonFixFailed, "after "+strconv.Itoa(len(t.fixes))+" fixes, the last ("+c.spec.ID+") was rejected: "+detail
	}
	e.loopFailed(t, reason, detail)
}

// loopFailed ends loop task t failed.
func (e *Engine) loopFailed(t *task, reason, detail string) {
	if t.state != lifecycle.TaskPending && t.state != lifecycle.TaskRunning && t.state != lifecycle.TaskReady {
		return
	}
	unqueue(t)
	t.setReason(reason, detail)
	e.set(t, lifecycle.TaskFailed)
	e.record(t.run, t, entry.TaskFailed, map[string]any{entry.KeyAttempt: int64(t.attempts), entry.KeyReason: reason, entry.KeyDetail: detail})
	e.skipDependents(t, lifecycle.TaskFailed)
}

// ownedEnded is called when a reviewer or a fix reaches a terminal state other than by its
// loop's own decision: a reviewer's end counts toward its quorum; a fix that failed for
// another reason than its gates (its agent failed, it was cancelled) fails its loop.
func (e *Engine) ownedEnded(x *task) {
	if x.run.cancelRequested {
		return
	}
	switch x.role {
	case causeReview:
		e.reviewEnded(x)
	case causeFix:
		if x.state == lifecycle.TaskFailed || x.state == lifecycle.TaskCancelled || x.state == lifecycle.TaskSkipped {
			t := x.by
			if t.state == lifecycle.TaskPending && t.reason == lifecycle.ReasonAwaitingFix {
				e.loopFailed(t, lifecycle.ReasonFixFailed, "fix "+x.spec.ID+" "+x.state+": "+orNone(x.reason))
			}
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func jcsMarshal(v any) ([]byte, error) { return jcs.Marshal(v) }

// verdictReason is the red verdict's own reason (exit-status, timeout, protected-path, ...).
func verdictReason(o Outcome) string {
	if o.Verdict == nil {
		return ""
	}
	return o.Verdict.Reason
}

// maxTailReason is how much of a red verdict's output tail a fix is given in its reasons.
const maxTailReason = 8 << 10

// verdictReasons are the reasons red work is handed to its fix: the verify command and what
// the host saw (the verdict's detail and the end of its output, redacted when recorded).
func verdictReasons(t *task, o Outcome) []string {
	v := o.Verdict
	if v == nil {
		return []string{"verify gate red: " + orNone(o.Detail)}
	}
	out := []string{"verify " + strings.Join(v.Command, " ") + ": " + orNone(v.Detail)}
	if tail := v.OutputTail; tail != "" {
		if len(tail) > maxTailReason {
			tail = tail[len(tail)-maxTailReason:]
			for len(tail) > 0 && !utf8.RuneStart(tail[0]) {
				tail = tail[1:]
			}
		}
		out = append(out, "output (the end): "+tail)
	}
	return out
}
