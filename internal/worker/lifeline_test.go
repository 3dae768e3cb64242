package worker

import (
	"bytes"
	"io"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/worker/wire"
)

// TestWatchLifeline: the worker ends when its supervisor's end of the lifeline closes, not
// before; the descriptor is close-on-exec and the variable gone, so nothing the agent runs
// holds the pipe; a bad variable is refused.
func TestWatchLifeline(t *testing.T) {
	rd, wr, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	// A descriptor without close-on-exec, as the worker inherits it.
	fd, err := unix.Dup(int(rd.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(wire.LifelineFDEnv, strconv.Itoa(fd))
	var mu sync.Mutex
	var stderr bytes.Buffer
	exited := make(chan int, 1)
	if err := watchLifeline(&lockedWriter{&mu, &stderr}, func(code int) { exited <- code }); err != nil {
		t.Fatal(err)
	}
	if _, ok := os.LookupEnv(wire.LifelineFDEnv); ok {
		t.Errorf("%s is still set: the agent would inherit it", wire.LifelineFDEnv)
	}
	if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC == 0 {
		t.Errorf("the lifeline descriptor is not close-on-exec (flags %d, %v): the agent would hold it", flags, err)
	}
	select {
	case code := <-exited:
		t.Fatalf("the worker ended (%d) while its supervisor lived", code)
	case <-time.After(100 * time.Millisecond):
	}
	// A byte written (the supervisor never writes one) is no death.
	if _, err := wr.Write([]byte{1}); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-exited:
		t.Fatalf("the worker ended (%d) on a byte", code)
	case <-time.After(100 * time.Millisecond):
	}
	wr.Close()
	select {
	case code := <-exited:
		if code == 0 {
			t.Error("the worker ended with 0 when its supervisor died")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the worker outlived its supervisor's lifeline")
	}
	mu.Lock()
	defer mu.Unlock()
	if !bytes.Contains(stderr.Bytes(), []byte("supervisor is gone")) {
		t.Errorf("stderr %q does not say why", stderr.String())
	}
}

// TestWatchLifeline_SupervisorAlreadyGone: a worker whose supervisor died before it started
// ends before watchLifeline returns, so nothing of the job runs.
func TestWatchLifeline_SupervisorAlreadyGone(t *testing.T) {
	rd, wr, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	wr.Close()
	t.Setenv(wire.LifelineFDEnv, strconv.Itoa(int(rd.Fd())))
	code := -1
	if err := watchLifeline(io.Discard, func(c int) { code = c }); err != nil {
		t.Fatal(err)
	}
	if code != 1 {
		t.Fatalf("watchLifeline returned with the supervisor gone and exit not called (code %d)", code)
	}
}

func TestWatchLifeline_Refused(t *testing.T) {
	for _, v := range []string{"", "x", "2", "65", "-1", "63"} {
		t.Run(v, func(t *testing.T) {
			t.Setenv(wire.LifelineFDEnv, v)
			if err := watchLifeline(os.Stderr, func(int) { t.Error("exit called") }); err == nil {
				t.Fatalf("%s=%q accepted", wire.LifelineFDEnv, v)
			}
		})
	}
	os.Unsetenv(wire.LifelineFDEnv)
	if err := watchLifeline(os.Stderr, func(int) { t.Error("exit called") }); err != nil {
		t.Fatalf("no lifeline: %v", err)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
