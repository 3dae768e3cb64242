package agoratest

import (
	"os"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Eventually calls check until it returns nil, first every 5 ms and then less often, at most
// every 100 ms, and fails tb after d naming what was awaited and check's last error. It is
// for state no event announces and each look costs (an API object, a container's state, a
// run's record read by a process): what the test's own process or a child's output can
// signal, it waits for as an event (a channel, a line, an exit). d bounds a wait on a loaded
// machine; it is not a timing assertion, so make it generous.
func Eventually(tb testing.TB, d time.Duration, what string, check func() error) {
	tb.Helper()
	if err := Await(d, check); err != nil {
		tb.Fatalf("timed out after %s waiting for %s: %v", d, what, err)
	}
}

// Await is [Eventually] for a caller that goes on after a wait that timed out: it returns
// nil once check does, or check's last error after d.
func Await(d time.Duration, check func() error) error {
	every := waitPoll
	for deadline := time.Now().Add(d); ; {
		err := check()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(every)
		every = min(2*every, 100*time.Millisecond)
	}
}

// Hang blocks until the process is killed: the rest of a helper process that stands for a
// hung program (a holder that waits for its kill, a CLI that never answers). It waits on a
// pipe no one writes, not on a clock, so no load ever makes it return; and it dies with its
// parent (the kernel's parent-death signal), so a test that failed before its kill leaves no
// helper behind.
func Hang() {
	ppid := os.Getppid()
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		panic("agoratest.Hang: " + err.Error())
	}
	if os.Getppid() != ppid {
		os.Exit(2) // the parent died before the signal was set
	}
	r, w, err := os.Pipe()
	if err != nil {
		panic("agoratest.Hang: " + err.Error())
	}
	var b [1]byte
	r.Read(b[:])
	runtime.KeepAlive(w) // an unreachable w would be closed by its finalizer, and end the read
	panic("agoratest.Hang: the pipe ended")
}
