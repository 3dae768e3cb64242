package agoratest

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestWaitFor: a condition that comes true ends the wait; one that never does fails the test
// naming what was awaited.
func TestWaitFor(t *testing.T) {
	n := 0
	WaitFor(t, 10*time.Second, "the third poll", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Errorf("polled %d times, want 3", n)
	}

	rec := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		WaitFor(rec, 20*time.Millisecond, "nothing", func() bool { return false })
	}()
	<-done
	if !strings.Contains(rec.msg, "timed out after 20ms waiting for nothing") {
		t.Errorf("failure %q, want it to name the wait", rec.msg)
	}
}

// fatalRecorder records Fatalf and stops its goroutine, as testing.T's does.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (r *fatalRecorder) Helper() {}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
