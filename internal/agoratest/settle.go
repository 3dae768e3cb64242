package agoratest

import (
	"runtime"
	"testing"
	"time"
)

// SettleGoroutines waits up to 10 s until the process runs at most base goroutines (what it
// ran before the test's work), and fails with every goroutine's stack if it never does: a
// goroutine the work left behind is a leak.
func SettleGoroutines(t testing.TB, base int, what string) {
	t.Helper()
	n := 0
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if n = runtime.NumGoroutine(); n <= base {
			return
		}
	}
	buf := make([]byte, 1<<16)
	buf = buf[:runtime.Stack(buf, true)]
	t.Fatalf("%s: %d goroutines, want at most %d as before:\n%s", what, n, base, buf)
}
