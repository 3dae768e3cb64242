package agoratest

import (
	"fmt"
	"testing"
	"time"
)

// WaitDead waits up to 30 s until process pid runs no more ([Running]: gone, or a zombie its
// parent has not reaped). A SIGKILL is delivered when the process is next scheduled, so on a
// loaded machine a command run right after kill(2) can still find the process running.
func WaitDead(t testing.TB, pid int) {
	t.Helper()
	WaitFor(t, 30*time.Second, fmt.Sprintf("process %d to die", pid), func() bool { return !Running(pid) })
}
