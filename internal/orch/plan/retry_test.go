package plan_test

import (
	"math"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/plan"
)

func fixed(f float64) func() float64 { return func() float64 { return f } }

// almostOne is the largest value below 1, the top of rnd's range.
var almostOne = math.Nextafter(1, 0)

func TestRetry_Backoff(t *testing.T) {
	r := plan.Retry{MaxAttempts: 10, InitialBackoff: time.Second, Multiplier: 2, MaxBackoff: 10 * time.Second}
	tests := []struct {
		name    string
		r       plan.Retry
		attempt int
		rnd     float64
		want    time.Duration
	}{
		{"first attempt, full", r, 1, 1, time.Second},
		{"first attempt, half", r, 1, 0.5, 500 * time.Millisecond},
		{"first attempt, none", r, 1, 0, 0},
		{"second doubles", r, 2, 1, 2 * time.Second},
		{"fourth", r, 4, 1, 8 * time.Second},
		{"fifth is capped", r, 5, 1, 10 * time.Second},
		{"far later is capped", r, 1000, 0.5, 5 * time.Second},
		{"attempt 0 counts as 1", r, 0, 1, time.Second},
		{"negative attempt counts as 1", r, -5, 1, time.Second},
		{"rnd above 1 is clamped", r, 2, 7, 2 * time.Second},
		{"rnd below 0 is clamped", r, 2, -1, 0},
		{"rnd NaN is 0", r, 2, math.NaN(), 0},
		{"unset fields take the built-in policy", plan.Retry{}, 3, 1, 20 * time.Second},
		{"multiplier 1 is constant", plan.Retry{InitialBackoff: 3 * time.Second, Multiplier: 1}, 50, 1, 3 * time.Second},
		{"huge durations do not overflow", plan.Retry{InitialBackoff: math.MaxInt64 / 2, Multiplier: 10, MaxBackoff: math.MaxInt64}, 3, 1, math.MaxInt64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.r.Backoff(tt.attempt, fixed(tt.rnd)); got != tt.want {
				t.Errorf("Backoff(%d, %v) = %s, want %s", tt.attempt, tt.rnd, got, tt.want)
			}
		})
	}
	t.Run("nil rnd stays in bounds", func(t *testing.T) {
		for a := 1; a <= 20; a++ {
			if b := r.Backoff(a, nil); b < 0 || b > r.MaxBackoff {
				t.Fatalf("Backoff(%d, nil) = %s, outside [0, %s]", a, b, r.MaxBackoff)
			}
		}
	})
}

// TestRetry_Backoff_Property draws valid policies: for attempts 1 to 1000 the backoff lies in
// [0, min(max, initial*mult^(attempt-1))] and, at the top of rnd's range, never shrinks.
func TestRetry_Backoff_Property(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		maxB := time.Duration(rapid.Int64Range(1, int64(plan.MaxRetryBackoff)).Draw(t, "max"))
		r := plan.Retry{
			MaxAttempts:    rapid.IntRange(1, plan.MaxRetryAttempts).Draw(t, "attempts"),
			InitialBackoff: time.Duration(rapid.Int64Range(1, int64(maxB)).Draw(t, "initial")),
			MaxBackoff:     maxB,
			Multiplier:     rapid.Float64Range(1, plan.MaxRetryMultiplier).Draw(t, "multiplier"),
		}
		u := rapid.Float64Range(0, almostOne).Draw(t, "rnd")
		prev := time.Duration(0)
		for a := 1; a <= 1000; a++ {
			b := r.Backoff(a, fixed(u))
			ceiling := float64(r.InitialBackoff) * math.Pow(r.Multiplier, float64(a-1))
			if b < 0 || b > r.MaxBackoff || float64(b) > ceiling*(1+1e-9) {
				t.Fatalf("Backoff(%d) = %s with %+v, rnd %v: outside [0, min(%s, %.0f)]", a, b, r, u, r.MaxBackoff, ceiling)
			}
			top := r.Backoff(a, fixed(almostOne))
			if top < prev {
				t.Fatalf("Backoff(%d) at the top of rnd = %s, less than %s for the attempt before", a, top, prev)
			}
			prev = top
		}
	})
}

func TestRetry_Retryable(t *testing.T) {
	no, yes := false, true
	tests := []struct {
		reason string
		want   bool
	}{
		{lifecycle.ReasonProviderFailed, true},
		{lifecycle.ReasonTimeout, true},
		{lifecycle.ReasonLost, true},
		{lifecycle.ReasonWorkerFailed, true},
		{lifecycle.ReasonDenied, false},
		{lifecycle.ReasonIntegrityFailed, false},
		{lifecycle.ReasonLimitExceeded, false},  // the same work would hit the same limit
		{lifecycle.ReasonBudgetExceeded, false}, // a retry would spend the same budget again
		{lifecycle.ReasonCancelled, false},
		{lifecycle.ReasonFetchFailed, false},
		{lifecycle.ReasonGatewayUnreachable, true}, // the gateway was away: the work itself is untried
		{lifecycle.ReasonVerifyFailed, false},      // the same patch fails the same gate; a fix loop tries again
		{lifecycle.ReasonStackConflict, false},     // the same bases conflict the same way
		{"", false},
		{"something-new", false},
		{"Timeout", false},
	}
	for _, tt := range tests {
		t.Run(tt.reason, func(t *testing.T) {
			for _, r := range []plan.Retry{{}, {OnWorkerFailed: &yes}, plan.DefaultRetry()} {
				if got := r.Retryable(tt.reason); got != tt.want {
					t.Errorf("Retryable(%q) = %v, want %v", tt.reason, got, tt.want)
				}
			}
		})
	}
	t.Run("on_worker_failed false", func(t *testing.T) {
		r := plan.Retry{OnWorkerFailed: &no}
		if r.Retryable(lifecycle.ReasonWorkerFailed) {
			t.Errorf("worker-failed retried with on_worker_failed: false")
		}
		if !r.Retryable(lifecycle.ReasonTimeout) {
			t.Errorf("on_worker_failed: false stopped a timeout retry")
		}
	})
	// A reason dispatch adds must be classified here on purpose, not fall to "never".
	t.Run("every dispatch reason is in the table", func(t *testing.T) {
		for _, reason := range lifecycle.Reasons() {
			if !slices.ContainsFunc(tests, func(tt struct {
				reason string
				want   bool
			}) bool {
				return tt.reason == reason
			}) {
				t.Errorf("dispatch reason %q has no row in this table", reason)
			}
		}
	})
}
