package cli_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/agoratest"
)

// startServing starts serve (an `agora orch serve`), its stderr kept in the buffer it returns,
// and returns once serve says it serves: the next command finds it, with no submissions tried
// in a loop until one gets through. It fails t, with what serve said, when serve ends first.
func startServing(t *testing.T, serve *exec.Cmd) *agoratest.SyncBuffer {
	t.Helper()
	out := &agoratest.SyncBuffer{}
	serve.Stderr = out
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	agoratest.WaitFor(t, 2*time.Minute, "orch serve to serve", func() bool {
		if exited(serve.Process.Pid) {
			// How it ended (an exit code, or the signal that killed it) says more than its
			// stderr when it wrote none.
			t.Fatalf("orch serve ended before it served (%v):\n%s", serve.Wait(), out.String())
		}
		return strings.Contains(out.String(), "orchestrator serving on")
	})
	return out
}

// exited reports whether child pid has ended, without reaping it: waitid with WNOWAIT asks the
// kernel, not /proc. /proc's state letter is not proof: while the front (agora) execs
// agora-full from a thread other than its first, the kernel shows the old leader as a zombie
// for a moment, and a Wait on that live serve would then block until the test's timeout.
func exited(pid int) bool {
	var info unix.Siginfo // zero: WNOHANG leaves it so when the child has not changed state
	err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	if err != nil {
		return errors.Is(err, unix.ECHILD) // reaped already
	}
	return info.Signo != 0
}

// pendingConnection reports whether a connection to one of process pid's Unix listeners
// waits to be accepted (pid stopped, say). The kernel lists such a connection in
// /proc/net/unix under its listener's bound name in state connecting (02), beside the
// listener (01); the listener is known by its inode, one of pid's descriptors.
func pendingConnection(t *testing.T, pid int) bool {
	t.Helper()
	fds, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		if l, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/" + fd.Name()); err == nil {
			if n, ok := strings.CutPrefix(l, "socket:["); ok {
				inodes[strings.TrimSuffix(n, "]")] = true
			}
		}
	}
	b, err := os.ReadFile("/proc/net/unix")
	if err != nil {
		t.Fatal(err)
	}
	// Num RefCount Protocol Flags Type St Inode Path
	var rows [][]string
	listeners := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 8 {
			rows = append(rows, f)
			if f[5] == "01" && inodes[f[6]] {
				listeners[f[7]] = true
			}
		}
	}
	for _, f := range rows {
		if f[5] == "02" && listeners[f[7]] {
			return true
		}
	}
	return false
}

// waitReplicated waits until the status files of home's serve (DB-replicate.json) say both
// its databases were replicated from a read snapshot taken after since: every commit before
// since is in the bucket. log is serve's, for the failure.
func waitReplicated(t *testing.T, home string, since time.Time, log func() string) {
	t.Helper()
	agoratest.Eventually(t, time.Minute, "both databases replicated past "+since.Format(time.RFC3339Nano), func() error {
		for _, db := range []string{"agora", "orch"} {
			var st struct{ Replicated time.Time }
			b, err := os.ReadFile(filepath.Join(home, db+"-replicate.json"))
			if err != nil {
				return err
			}
			if err := json.Unmarshal(b, &st); err != nil {
				return fmt.Errorf("%s-replicate.json: %w", db, err)
			}
			if !st.Replicated.After(since) {
				return fmt.Errorf("%s replicated as of %s\n%s", db, st.Replicated.Format(time.RFC3339Nano), log())
			}
		}
		return nil
	})
}
