package lifecycle_test

import (
	"slices"
	"testing"

	"github.com/agora-dev/agora/internal/lifecycle"
)

// TestSpellings pins every word's bytes: they are stored in agora.db and orch.db, recorded in
// signed audit entries and sent over the wire, so a changed spelling breaks what is stored.
func TestSpellings(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{lifecycle.DispatchAccepted, "accepted"},
		{lifecycle.DispatchStarted, "started"},
		{lifecycle.DispatchFinished, "finished"},
		{lifecycle.DispatchNeedsInput, "needs_input"},
		{lifecycle.DispatchFailed, "failed"},
		{lifecycle.DispatchCancelled, "cancelled"},
		{lifecycle.DispatchAnswered, "answered"},
		{lifecycle.TaskPending, "pending"},
		{lifecycle.TaskReady, "ready"},
		{lifecycle.TaskRunning, "running"},
		{lifecycle.TaskSucceeded, "succeeded"},
		{lifecycle.TaskFailed, "failed"},
		{lifecycle.TaskNeedsInput, "needs_input"},
		{lifecycle.TaskCancelled, "cancelled"},
		{lifecycle.TaskSkipped, "skipped"},
		{lifecycle.TaskRejected, "rejected"},
		{lifecycle.RunRunning, "running"},
		{lifecycle.RunNeedsInput, "needs_input"},
		{lifecycle.RunSucceeded, "succeeded"},
		{lifecycle.RunFailed, "failed"},
		{lifecycle.RunCancelled, "cancelled"},
		{lifecycle.ReasonWorkerFailed, "worker-failed"},
		{lifecycle.ReasonProviderFailed, "provider-failed"},
		{lifecycle.ReasonTimeout, "timeout"},
		{lifecycle.ReasonCancelled, "cancelled"},
		{lifecycle.ReasonFetchFailed, "fetch-failed"},
		{lifecycle.ReasonIntegrityFailed, "integrity-failed"},
		{lifecycle.ReasonDenied, "denied"},
		{lifecycle.ReasonLost, "lost"},
		{lifecycle.ReasonLimitExceeded, "limit-exceeded"},
		{lifecycle.ReasonBudgetExceeded, "budget-exceeded"},
		{lifecycle.ReasonGatewayUnreachable, "gateway-unreachable"},
		{lifecycle.ReasonVerifyFailed, "verify-failed"},
		{lifecycle.ReasonStackConflict, "stack-conflict"},
		{lifecycle.ReasonFanOutRefused, "fan-out-refused"},
		{lifecycle.ReasonReviewRejected, "review-rejected"},
		{lifecycle.ReasonFixFailed, "fix-failed"},
		{lifecycle.ReasonAncestorFailed, "ancestor-failed"},
		{lifecycle.ReasonAncestorCancelled, "ancestor-cancelled"},
		{lifecycle.ReasonAwaitingReview, "awaiting-review"},
		{lifecycle.ReasonAwaitingFix, "awaiting-fix"},
		{lifecycle.AncestorReason(lifecycle.TaskFailed), "ancestor-failed"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q: a stored word never changes; add a new one instead", c.got, c.want)
		}
	}
}

// TestLists checks each list against the states its helper names, so a new state added to a
// block of constants and forgotten in its list is caught.
func TestLists(t *testing.T) {
	for _, c := range []struct {
		name  string
		list  []string
		n     int
		ended func(string) bool
		ends  []string
	}{
		{"dispatch", lifecycle.DispatchStates(), 7, lifecycle.DispatchEnded,
			[]string{"finished", "needs_input", "failed", "cancelled", "answered"}},
		{"task", lifecycle.TaskStates(), 9, lifecycle.TaskEnded,
			[]string{"succeeded", "failed", "cancelled", "skipped", "rejected"}},
		{"run", lifecycle.RunStates(), 5, lifecycle.RunEnded,
			[]string{"succeeded", "failed", "cancelled"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if len(c.list) != c.n || len(slices.Compact(slices.Sorted(slices.Values(c.list)))) != c.n {
				t.Errorf("got %q, want %d distinct states", c.list, c.n)
			}
			var ends []string
			for _, s := range c.list {
				if c.ended(s) {
					ends = append(ends, s)
				}
			}
			if !slices.Equal(ends, c.ends) {
				t.Errorf("ended states: got %q, want %q", ends, c.ends)
			}
			if c.ended("") || c.ended("bogus") {
				t.Error("an unknown state reads as ended")
			}
		})
	}
	if n := len(lifecycle.Reasons()); n != 13 {
		t.Errorf("Reasons: got %d, want 13", n)
	}
	for _, r := range lifecycle.WorkerReasons() {
		if !slices.Contains(lifecycle.Reasons(), r) {
			t.Errorf("worker reason %q is not a dispatch reason", r)
		}
	}
	for _, r := range lifecycle.TaskReasons() {
		if slices.Contains(lifecycle.Reasons(), r) {
			t.Errorf("task reason %q is also a dispatch reason", r)
		}
	}
}

func TestRetryable(t *testing.T) {
	var got []string
	for _, r := range append(lifecycle.Reasons(), lifecycle.TaskReasons()...) {
		if lifecycle.Retryable(r) {
			got = append(got, r)
		}
	}
	want := []string{"worker-failed", "provider-failed", "timeout", "lost", "gateway-unreachable"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if lifecycle.Retryable("") || lifecycle.Retryable("something-new") {
		t.Error("an unknown reason is retryable")
	}
}
