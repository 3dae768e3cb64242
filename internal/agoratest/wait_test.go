package agoratest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
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

// TestEventually: a check that comes to pass ends the wait; one that never does fails the
// test naming what was awaited and the check's last error.
func TestEventually(t *testing.T) {
	n := 0
	Eventually(t, 10*time.Second, "the third look", func() error {
		if n++; n < 3 {
			return fmt.Errorf("look %d", n)
		}
		return nil
	})
	if n != 3 {
		t.Errorf("looked %d times, want 3", n)
	}

	rec := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Eventually(rec, 20*time.Millisecond, "nothing", func() error { return fmt.Errorf("still not") })
	}()
	<-done
	if !strings.Contains(rec.msg, "timed out after 20ms waiting for nothing: still not") {
		t.Errorf("failure %q, want it to name the wait and the last error", rec.msg)
	}
}

// TestHang: a helper process that hangs stays, collections and all, until it is killed.
func TestHang(t *testing.T) {
	if os.Getenv("AGORATEST_HANG") != "" {
		go func() {
			// Collections on the side: a finalizer that closed the pipe's write end would
			// end the hang, and the process, before the fifth line.
			for i := range 5 {
				runtime.GC()
				runtime.GC()
				runtime.Gosched()
				fmt.Printf("collected %d\n", i)
			}
		}()
		Hang()
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHang$")
	cmd.Env = append(os.Environ(), "AGORATEST_HANG=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(out)
	for i := range 5 {
		if line, _ := br.ReadString('\n'); line != fmt.Sprintf("collected %d\n", i) {
			t.Errorf("the helper said %q", line)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("the helper ended with %v, want killed", err)
	}
}

// TestSettleBubble: a goroutine left waiting in the bubble fails the settle, naming it; one
// that ended does not; goroutines outside the bubble do not count.
func TestSettleBubble(t *testing.T) {
	outside, spawn, spawned := make(chan struct{}), make(chan struct{}), make(chan struct{})
	defer close(outside)
	go func() { // outside the bubble: on spawn, one more goroutine outside it
		<-spawn
		go func() { <-outside }()
		close(spawned)
	}()
	synctest.Test(t, func(t *testing.T) {
		synctest.Wait()
		base := BubbleGoroutines() // the test's own, and the testing package's in the bubble
		if base == 0 {
			t.Fatal("a bubble counts no goroutine")
		}
		ended := make(chan struct{})
		go func() { close(ended) }()
		<-ended
		synctest.Wait()
		SettleBubble(t, base, "after a goroutine that ended")
		close(spawn)
		<-spawned
		SettleBubble(t, base, "after a goroutine started outside the bubble")

		stuck := make(chan struct{})
		go func() { <-stuck }()
		synctest.Wait()
		rec := &fatalRecorder{TB: t}
		done := make(chan struct{})
		go func() { // one more goroutine in the bubble: base+1 is what it may hold
			defer close(done)
			SettleBubble(rec, base+1, "after a goroutine left waiting")
		}()
		<-done
		if want := fmt.Sprintf("after a goroutine left waiting: %d goroutines in the bubble, want at most %d", base+2, base+1); !strings.Contains(rec.msg, want) || !strings.Contains(rec.msg, "TestSettleBubble") {
			t.Errorf("failure %q, want %q and the goroutines' stacks", rec.msg, want)
		}
		close(stuck)
	})
}
