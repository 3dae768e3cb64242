package orch

import (
	"encoding/json"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/agora-dev/agora/internal/budget"
	"github.com/agora-dev/agora/internal/lifecycle"

	"github.com/agora-dev/agora/internal/audit/entry"
)

// complete applies an attempt's end.
func (e *Engine) complete(o Outcome) {
	t, ok := e.live[o.DispatchID]
	if !ok {
		return // a duplicate report, or an attempt of a run already resolved
	}
	// An outcome's text can carry a sandbox's bytes (a file name in a provider's error, a
	// question): the audit's canonical JSON takes UTF-8 alone, and a commit that cannot
	// encode an entry stops the engine.
	o.Reason, o.Detail, o.Question = validText(o.Reason), validText(o.Detail), validText(o.Question)
	delete(e.live, o.DispatchID)
	e.releaseSlot(t)
	r := t.run
	now := e.opts.Now()
	end := attemptEnd{id: o.DispatchID, runID: r.id, state: o.State, reason: o.Reason, at: now}
	cancelled := t.cancel || r.cancelRequested
	details := e.newDetails()
	details[entry.KeyAttempt], details[entry.KeyDispatchID] = int64(t.attempts), o.DispatchID
	if u := o.Usage; u != nil {
		// Committed with the attempt's end and its audit entry: the run's usage is the sum
		// over its attempts' rows, whatever crashes.
		b, _ := json.Marshal(u)
		end.usage = string(b)
		r.usage = r.usage.Add(*u)
		details["usage"] = usageDetails(*u)
	}
	if v := o.Verdict; v != nil {
		// In the batch that ends the attempt, before the entry saying how it ended: the
		// verdict is the dispatch's, observed by agora's host (dispatch.verified).
		b, _ := json.Marshal(v)
		end.verdict = string(b)
		vd := v.Details()
		vd[entry.KeyAttempt], vd[entry.KeyDispatchID], vd[entry.KeyVerdict] = int64(t.attempts), o.DispatchID, v.Digest()
		e.record(r, t, entry.TaskVerified, vd)
		details[entry.KeyVerdict] = v.Digest()
	}
	e.b.ended = append(e.b.ended, end)
	switch {
	case o.State == lifecycle.TaskSucceeded && !(cancelled && t.gated()):
		// (A cancel asked while gated work ran ends it cancelled: success must pass the gate.)
		t.setAnswer("")
		t.setParent("")
		if t.role == causeReview {
			v := o.Review
			if v == nil {
				iv := InvalidReview("the executor read no review")
				v = &iv
			}
			t.own().vote = v
			details["review"] = reviewDetails(v)
		}
		switch {
		case e.startReview(t, details):
		case t.role == causeFix:
			e.accept(t, details)
		default:
			e.succeed(t, details, o)
		}
	case cancelled || o.State == lifecycle.TaskCancelled:
		t.setReason(lifecycle.ReasonCancelled, o.Detail)
		e.set(t, lifecycle.TaskCancelled)
		e.record(r, t, entry.TaskCancelled, details)
		e.skipDependents(t, lifecycle.TaskCancelled)
	case o.State == lifecycle.TaskNeedsInput:
		t.setQuestion(o.Question)
		t.setParent(o.DispatchID)
		e.set(t, lifecycle.TaskNeedsInput)
		details["question_chars"] = int64(len(o.Question))
		e.record(r, t, entry.TaskNeedsInput, details)
	case o.Reason == lifecycle.ReasonVerifyFailed && loopOf(t).spec.OnFail != nil:
		// Red work with a fix loop: the loop's next fix takes over (never a retry).
		t.failures++
		details["verdict_reason"], details[entry.KeyDetail] = verdictReason(o), o.Detail
		e.reject(t, lifecycle.ReasonVerifyFailed, verdictReasons(t, o), details)
	default: // failed
		t.failures++
		t.setReason(o.Reason, o.Detail)
		details[entry.KeyReason], details[entry.KeyDetail] = o.Reason, o.Detail
		if t.spec.Retry.Retryable(o.Reason) && t.failures < t.spec.Retry.MaxAttempts {
			t.setRetryAt(now.Add(t.spec.Retry.Backoff(t.failures, e.opts.Rand)))
			e.set(t, lifecycle.TaskPending)
			e.startTimer(t)
			details[entry.KeyRetryAt] = ts(t.retryAt)
			e.record(r, t, entry.TaskRetryScheduled, details)
		} else {
			e.set(t, lifecycle.TaskFailed)
			e.record(r, t, entry.TaskFailed, details)
			e.skipDependents(t, lifecycle.TaskFailed)
		}
	}
	if t.role != "" && lifecycle.TaskEnded(t.state) {
		e.ownedEnded(t)
	}
	e.settle(r)
}

// usageDetails is u for an audit entry: integers only (cost in nano-dollars).
func usageDetails(u budget.Usage) map[string]any {
	return map[string]any{entry.KeyInputTokens: u.InputTokens, entry.KeyOutputTokens: u.OutputTokens, entry.KeyCachedTokens: u.CachedTokens,
		"model_calls": u.ModelCalls, "cost_nano_usd": int64(math.Round(u.CostUSD * 1e9))}
}

// failOverBudget ends a ready task that may not fire because its run's budget is spent.
func (e *Engine) failOverBudget(t *task, spent string) {
	unqueue(t)
	t.setReason(lifecycle.ReasonBudgetExceeded, "the run's budget is spent ("+spent+"); the task was not fired")
	e.set(t, lifecycle.TaskFailed)
	e.record(t.run, t, entry.TaskFailed, map[string]any{entry.KeyAttempt: int64(t.attempts), entry.KeyReason: t.reason, entry.KeyDetail: t.detail})
	e.skipDependents(t, lifecycle.TaskFailed)
	e.settle(t.run)
}

// settle derives the run's state from its task counts and records a change; a run that
// succeeded or was cancelled is sealed at once (nothing can change it any more).
func (e *Engine) settle(r *run) {
	c := r.counts
	var s string
	switch {
	case c[lifecycle.TaskRunning] > 0 || c[lifecycle.TaskReady] > 0 || r.backoff > 0 || r.cascading > 0:
		s = lifecycle.RunRunning
	case c[lifecycle.TaskNeedsInput] > 0 && !r.cancelRequested:
		s = lifecycle.RunNeedsInput
	case c[lifecycle.TaskPending] > 0 && !r.cancelRequested:
		s = lifecycle.RunRunning // cannot happen: a pending task waits for a live ancestor
	case r.cancelRequested:
		s = lifecycle.RunCancelled
	case c[lifecycle.TaskSucceeded]+c[lifecycle.TaskRejected] == len(r.tasks): // a rejected fix was superseded by its loop
		s = lifecycle.RunSucceeded
	default:
		s = lifecycle.RunFailed
	}
	if s == r.state {
		return
	}
	r.state = s
	e.b.runs[r] = true
	if lifecycle.RunEnded(s) {
		r.endedAt = e.opts.Now().UTC()
		details := map[string]any{entry.KeyState: s, "counts": countsDetail(r)}
		if !r.budget.IsZero() || !r.usage.IsZero() {
			details["usage"] = usageDetails(r.usage)
		}
		if spent := r.budgetSpent(); spent != "" && s == lifecycle.RunFailed {
			details[entry.KeyReason], details[entry.KeyDetail] = lifecycle.ReasonBudgetExceeded, spent
		}
		e.record(r, nil, entry.RunEnded, details)
		if s != lifecycle.RunFailed {
			e.seal(r)
		}
	} else {
		r.endedAt = timeZero
		e.record(r, nil, entry.RunState, map[string]any{entry.KeyState: s})
	}
}

// seal closes r for good.
func (e *Engine) seal(r *run) {
	r.sealed = true
	e.b.runs[r] = true
	// The count lets a verifier tell that a run bundle holds every entry of the run.
	e.record(r, nil, entry.RunSealed, map[string]any{entry.KeyState: r.state, entry.KeyPlanDigest: r.digest, entry.KeyEntries: int64(r.entries)})
	e.b.sealed = append(e.b.sealed, r.id)
}

func countsDetail(r *run) map[string]any {
	m := map[string]any{}
	for k, v := range r.counts {
		if v > 0 {
			m[k] = int64(v)
		}
	}
	return m
}

// validText is s with each byte sequence that is not UTF-8 replaced by U+FFFD.
func validText(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
