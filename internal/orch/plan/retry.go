package plan

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/agora-dev/agora/internal/lifecycle"
)

// The built-in retry policy, which defaults.retry and a task's retry override field by field.
const (
	DefaultMaxAttempts    = 1 // no retry unless asked
	DefaultInitialBackoff = 5 * time.Second
	DefaultMultiplier     = 2.0
	DefaultMaxBackoff     = 5 * time.Minute
	minMultiplier         = 1.0 // below 1 the backoff would shrink
)

// DefaultRetry returns the built-in policy: one attempt, and were there more, backoffs from 5s
// doubling up to 5m, with worker-failed attempts retried.
func DefaultRetry() Retry {
	on := true
	return Retry{
		MaxAttempts:    DefaultMaxAttempts,
		InitialBackoff: DefaultInitialBackoff,
		MaxBackoff:     DefaultMaxBackoff,
		Multiplier:     DefaultMultiplier,
		OnWorkerFailed: &on,
	}
}

// with returns r with every field o sets (non-zero, non-nil) taken from o.
func (r Retry) with(o *Retry) Retry {
	if o == nil {
		return r
	}
	if o.MaxAttempts != 0 {
		r.MaxAttempts = o.MaxAttempts
	}
	if o.InitialBackoff != 0 {
		r.InitialBackoff = o.InitialBackoff
	}
	if o.MaxBackoff != 0 {
		r.MaxBackoff = o.MaxBackoff
	}
	if o.Multiplier != 0 {
		r.Multiplier = o.Multiplier
	}
	if o.OnWorkerFailed != nil {
		b := *o.OnWorkerFailed
		r.OnWorkerFailed = &b
	}
	return r
}

// Backoff returns how long to wait before retrying after attempt (1 for the first attempt)
// failed: full jitter, rnd() times min(MaxBackoff, InitialBackoff * Multiplier^(attempt-1)).
// rnd MUST return a value in [0, 1); out-of-range values are clamped, and nil means
// math/rand/v2 (jitter spreads load; it guards nothing). Unset fields take the built-in
// policy. The result is never negative nor above MaxBackoff, for any attempt.
func (r Retry) Backoff(attempt int, rnd func() float64) time.Duration {
	r = DefaultRetry().with(&r)
	if r.MaxBackoff < 0 {
		return 0
	}
	attempt = max(attempt, 1)
	ceiling := float64(r.MaxBackoff)
	if r.InitialBackoff > 0 && r.Multiplier > 0 {
		// The power overflows to +Inf long before attempt does; both cap at MaxBackoff.
		c := float64(r.InitialBackoff) * math.Pow(r.Multiplier, float64(attempt-1))
		if !math.IsNaN(c) && c < ceiling {
			ceiling = c
		}
	}
	if rnd == nil {
		rnd = rand.Float64
	}
	j := rnd()
	if math.IsNaN(j) || j < 0 {
		j = 0
	} else if j > 1 {
		j = 1
	}
	// Compared as floats first: converting a float at or past 2^63 to an integer is undefined.
	f := j * ceiling
	if f >= float64(r.MaxBackoff) {
		return r.MaxBackoff
	}
	return max(time.Duration(f), 0)
}

// Retryable reports whether an attempt that failed for reason may be retried (attempts left
// permitting): a reason [lifecycle.Retryable] names, worker-failed only unless OnWorkerFailed
// is false.
func (r Retry) Retryable(reason string) bool {
	if reason == lifecycle.ReasonWorkerFailed {
		return r.OnWorkerFailed == nil || *r.OnWorkerFailed
	}
	return lifecycle.Retryable(reason)
}
