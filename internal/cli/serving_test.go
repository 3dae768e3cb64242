package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

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

// exited reports whether process pid has ended (a zombie its parent has not reaped, or gone).
func exited(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) == 0 || f[0] == "Z" || f[0] == "X"
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
