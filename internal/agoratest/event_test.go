package agoratest

import (
	"testing"
	"time"
)

// TestPoll: a condition that comes true ends the poll with true; one that never does ends it
// with false once the bound has passed.
func TestPoll(t *testing.T) {
	n := 0
	if !Poll(10*time.Second, func() bool { n++; return n == 3 }) || n != 3 {
		t.Errorf("polled %d times, want true on the third", n)
	}
	if Poll(20*time.Millisecond, func() bool { return false }) {
		t.Error("a condition that never held polled true")
	}
}
