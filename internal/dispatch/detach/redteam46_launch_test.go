package detach

import (
	"context"
	"errors"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
)

// TestRedTeam46_LaunchLeavesNoGoroutineAfterTheSupervisor: Launch's waiter
// goroutine (which closes done) lives as long as the supervisor and no longer, whichever way
// Launch returned: started (done handed out), its caller gone mid-start (ctx cancelled: no
// done, an error), or the start given up (late). Each supervisor killed, the process is back
// to the goroutines it ran before, and a handed-out done is closed.
func TestRedTeam46_LaunchLeavesNoGoroutineAfterTheSupervisor(t *testing.T) {
	run := func(t *testing.T, start bool, within time.Duration, cancelMidStart bool) (<-chan struct{}, error) {
		dir := t.TempDir()
		body := `exec sleep 30`
		if start {
			body = `touch '` + dir + `/started-'"$3"
exec sleep 30`
		}
		bin := fakeAgora(t, dir, body)
		s := &Supervisors{Bin: bin, Records: newFakeRecords(dir, accepted("D1")), startWithin: within}
		runtime.GC()
		base := runtime.NumGoroutine()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if cancelMidStart {
			go func() {
				agoratest.WaitFor(t, 10*time.Second, "the supervisor to start", func() bool { return len(spawned(t, dir)) == 1 })
				cancel()
			}()
		}
		_, done, err := s.Launch(ctx, "D1")
		// A Launch that gave up (late) may return before the supervisor's shell has
		// written its pid.
		agoratest.WaitFor(t, 10*time.Second, "the supervisor to write its pid", func() bool { return len(spawned(t, dir)) > 0 })
		pids := spawned(t, dir)
		if len(pids) != 1 {
			t.Fatalf("spawned %v, want one supervisor", pids)
		}
		if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		waitReaped(t, pids[0])
		if done != nil {
			<-done // closed at the supervisor's exit; the test's timeout says if never
		}
		agoratest.SettleGoroutines(t, base, "after the supervisor exited")
		return done, err
	}
	t.Run("started", func(t *testing.T) {
		done, err := run(t, true, 0, false)
		if err != nil || done == nil {
			t.Fatalf("Launch of a dispatch that starts = %v, %v; want a done channel", done, err)
		}
	})
	t.Run("caller gone mid-start", func(t *testing.T) {
		done, err := run(t, false, 0, true)
		if !errors.Is(err, context.Canceled) || done != nil {
			t.Fatalf("Launch cancelled mid-start = %v, %v; want context.Canceled and no done", done, err)
		}
	})
	t.Run("late", func(t *testing.T) {
		done, err := run(t, false, 50*time.Millisecond, false)
		if err == nil || done != nil {
			t.Fatalf("Launch of a dispatch that never starts = %v, %v; want an error and no done", done, err)
		}
	})
}
