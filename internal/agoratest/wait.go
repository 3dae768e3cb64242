package agoratest

import (
	"testing"
	"time"
)

// waitPoll is how often [WaitFor] asks again.
const waitPoll = 5 * time.Millisecond

// WaitFor polls cond until it holds, failing tb with "timed out after D waiting for WHAT"
// once d has passed. d bounds a wait on a loaded machine; it is not a timing assertion, so
// make it generous.
func WaitFor(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(waitPoll) {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s waiting for %s", d, what)
		}
	}
}
