package orch

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/orch/service"
)

// Test-only settings of serve's scheduler, read from the environment so the crash tests of
// schedules (internal/orch/service/schedule_kill9_test.go) can drive the real binary. Nobody
// else sets them; serve warns on stderr when they are set.
const (
	// envTestOnlyScheduleClock names a file holding an RFC 3339 time: the scheduler's clock
	// (slots come due when the test writes a later time), looked at every 50ms.
	envTestOnlyScheduleClock = "AGORA_TESTONLY_SCHEDULE_CLOCK"
	// envTestOnlyScheduleCrash names a step of firing a slot (before-submit, after-submit,
	// after-mark) at which serve kills itself with SIGKILL.
	envTestOnlyScheduleCrash = "AGORA_TESTONLY_SCHEDULE_CRASH"
)

// testOnlySchedulerHooks applies the test-only settings to s.
func testOnlySchedulerHooks(f *cmdutil.Factory, s *service.Scheduler) {
	if path := f.Getenv(envTestOnlyScheduleClock); path != "" {
		fmt.Fprintf(f.IO.ErrOut, "agora: warning: %s is set: the scheduler's clock is the time in %s (for tests only)\n", envTestOnlyScheduleClock, path)
		// A read that races the test's rewrite of the file sees it empty or half written: the
		// clock then stays where it last was. Falling back to the wall clock fired real-time
		// slots in the middle of a test (CI: TestSchedule_MissedSlotsCatchUp).
		var (
			mu   sync.Mutex // Now is called by the scheduler and by HTTP handlers
			last time.Time
		)
		s.Now = func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			b, err := os.ReadFile(path)
			if err == nil {
				if t, perr := time.Parse(time.RFC3339Nano, strings.TrimSpace(string(b))); perr == nil {
					last = t
				}
			}
			if last.IsZero() {
				return time.Now()
			}
			return last
		}
		s.MaxWait = 50 * time.Millisecond
	}
	if point := f.Getenv(envTestOnlyScheduleCrash); point != "" {
		fmt.Fprintf(f.IO.ErrOut, "agora: warning: %s is set: serve kills itself %s a slot (for tests only)\n", envTestOnlyScheduleCrash, point)
		s.TestOnlyCrash = func(at string) {
			if at == point {
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {} // the signal is on its way
			}
		}
	}
}
