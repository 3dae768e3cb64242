package orch

import (
	"cmp"
	"encoding/json"
	"strings"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// Review quorum: when a task with a review finishes its work (its attempt succeeded, its
// verify gate green), it stays pending ("awaiting-review") and the engine adds one review
// task per reviewer in the same transaction. Each reviewer's attempt ends with its review,
// which the executor read from the reviewer's final answer as its worker vouched for it (no
// vouched answer, or one that is not the review object, is a rejection saying why). When
// every reviewer has ended, the work is
// approved at the threshold (orch.task.reviewed), else it is rejected: the fix loop runs, or
// the task fails naming the reasons.

// settledReason is a stored task row's reason and detail as a reader shows them: a succeeded
// task awaits nothing, so the awaiting-review or awaiting-fix reason (and the reviewers or fixes
// its detail names) that an older agora left on the row of work it accepted reads as none.
func settledReason(state, reason, detail string) (string, string) {
	if state == lifecycle.TaskSucceeded && (reason == lifecycle.ReasonAwaitingReview || reason == lifecycle.ReasonAwaitingFix) {
		return "", ""
	}
	return reason, detail
}

// startReview holds c's finished work for review: c stays pending, its reviewers are added.
// It reports false when c has no review.
func (e *Engine) startReview(c *task, details map[string]any) bool {
	if c.spec.Review == nil {
		return false
	}
	r := c.run
	c.setReason(lifecycle.ReasonAwaitingReview, "")
	e.set(c, lifecycle.TaskPending)
	details["awaiting"] = "review"
	e.record(r, c, entry.TaskProduced, details)
	added, err := e.extend(r, c, extRow{Cause: causeReview, Task: c.spec.ID, Data: mustJCS(reviewData{FromDispatch: c.dispatchID})}, c.dispatchID)
	if err != nil {
		e.reject(c, lifecycle.ReasonReviewRejected, []string{"its reviewers could not be added: " + err.Error()}, nil)
		return true
	}
	ids := make([]string, len(c.reviewers))
	for i, rv := range c.reviewers {
		ids[i] = rv.spec.ID
	}
	c.setReason(c.reason, "reviewers: "+strings.Join(ids, ", "))
	e.touch(c)
	for _, rv := range added {
		e.becomeReady(rv)
	}
	return true
}

// reviewEnded counts reviewer rv's end toward its task's quorum, deciding once all ended.
func (e *Engine) reviewEnded(rv *task) {
	c := rv.by
	if c.state != lifecycle.TaskPending || c.reason != lifecycle.ReasonAwaitingReview || c.run.cancelRequested {
		return
	}
	approvals := 0
	var reasons []string
	for _, x := range c.reviewers {
		if !lifecycle.TaskEnded(x.state) {
			return
		}
		switch {
		case x.state == lifecycle.TaskSucceeded && x.vote != nil && x.vote.Approve:
			approvals++
		case x.state == lifecycle.TaskSucceeded && x.vote != nil:
			reasons = append(reasons, reviewReasons(x)...)
		default:
			reasons = append(reasons, x.spec.ID+" "+x.state+": "+orNone(x.reason))
		}
	}
	need := c.spec.Review.Approve
	approved := approvals >= need
	e.record(c.run, c, entry.TaskReviewed, map[string]any{
		"approved": approved, "approvals": int64(approvals), "reviewers": int64(len(c.reviewers)), "approve": int64(need),
		"reasons": anyStrings(capReasons(reasons)),
	})
	if approved {
		// Not the attempt's end (that was orch.task.produced): the work it approved.
		e.accept(c, map[string]any{entry.KeyAttempt: int64(c.attempts), "product": c.dispatchID, "reviewed": true})
		return
	}
	e.reject(c, lifecycle.ReasonReviewRejected, reasons, nil)
}

// reviewReasons are a rejecting reviewer's reasons, each prefixed with its task id.
func reviewReasons(x *task) []string {
	if len(x.vote.Reasons) == 0 {
		return []string{x.spec.ID + ": rejected without a reason"}
	}
	out := make([]string, len(x.vote.Reasons))
	for i, r := range x.vote.Reasons {
		out[i] = x.spec.ID + ": " + r
	}
	return out
}

func orNone(s string) string {
	return cmp.Or(s, "no reason recorded")
}

// maxReasonsBytes caps the reasons an entry, a task's detail or a fix's input carries.
const maxReasonsBytes = 16 << 10

// capReasons is reasons cut to maxReasonsBytes in all, saying how many were left out.
func capReasons(reasons []string) []string {
	n := 0
	for i, r := range reasons {
		if n+len(r) > maxReasonsBytes {
			out := append([]string(nil), reasons[:i]...)
			return append(out, "... and "+itoa(len(reasons)-i)+" more reasons")
		}
		n += len(r)
	}
	if reasons == nil {
		return []string{}
	}
	return reasons
}

// reviewDetails is a reviewer's review for its succeeded entry.
func reviewDetails(v *Review) map[string]any {
	return map[string]any{"approve": v.Approve, "reasons": anyStrings(capReasons(v.Reasons)), "invalid": v.Invalid}
}

func mustJCS(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // plain structs of strings and ints
	}
	var x any
	if err := decodeNumbers(b, &x); err != nil {
		panic(err)
	}
	c, err := jcsMarshal(x)
	if err != nil {
		panic(err)
	}
	return c
}

// gated reports whether t's success must pass a judgment first: its own review, or its
// loop's (a fix's success is its loop task's).
func (t *task) gated() bool { return t.spec.Review != nil || t.role == causeFix }
