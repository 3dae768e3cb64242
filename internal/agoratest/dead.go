package agoratest

import (
	"bytes"
	"fmt"
	"os"
	"testing"
	"time"
)

// WaitDead waits up to 30 s until process pid runs no more: gone, or a zombie its parent has
// not reaped. A SIGKILL is delivered when the process is next scheduled, so on a loaded
// machine a command run right after kill(2) can still find the process running.
func WaitDead(t testing.TB, pid int) {
	t.Helper()
	WaitFor(t, 30*time.Second, fmt.Sprintf("process %d to die", pid), func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return true
		}
		// The state is the field after the command name, which ends at the last ')'.
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
			return b[i+2] == 'Z' || b[i+2] == 'X'
		}
		return false
	})
}
