package service_test

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/service"
)

// The
// resident's log of refusals, serve's log of declines, and Listen's hidden name under
// concurrency. What broke was fixed: refusals (400, 404) are limited as declines are, and
// the hidden name is new for each Listen, checked to be the socket at path after the rename.

// TestRedTeam48b_RefusalFlood: resident.log is bounded against a process of this
// user posting hand-offs the resident declines (409: one line a minute per reason). The same
// process posting hand-offs the resident refuses instead (a body that does not decode: 400;
// or any other route: 404) still writes a "refused" line each: logRefusals logs at warn, and
// the resident's server logger keeps warn. resident.log is capped only when a resident
// starts, and these do not touch its idle clock but come faster than it runs out.
func TestRedTeam48b_RefusalFlood(t *testing.T) {
	e := residentEnv(t, "")
	e.firstResident()
	logPath := filepath.Join(e.home, "orch", "resident.log")
	before, err := os.Stat(logPath)
	must(t, err)
	hc := socketClient(e.residentSock())
	const n = 1000
	statuses := map[int]int{}
	for i := range n {
		var resp *http.Response
		var err error
		if i%2 == 0 {
			resp, err = hc.Post("http://agora"+api.HandoffPath, "application/json", strings.NewReader(`{"home":"/x"}`))
		} else {
			resp, err = hc.Get("http://agora/v1/health")
		}
		if err != nil {
			t.Fatalf("after %d requests: %v", i, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		statuses[resp.StatusCode]++
	}
	e.stopResident()
	fi, err := os.Stat(logPath)
	must(t, err)
	log, _ := os.ReadFile(logPath)
	refused := bytes.Count(log, []byte("msg=refused"))
	t.Logf("%d refused requests (statuses %v): resident.log grew %d bytes, %d 'refused' lines", n, statuses, fi.Size()-before.Size(), refused)
	if refused > 10 {
		t.Errorf("%d refused requests of one process wrote %d 'refused' lines (%d bytes) to resident.log: a refusal flood grows it without bound as the decline flood did",
			n, refused, fi.Size()-before.Size())
	}
}

// TestRedTeam48b_ServeSaysEveryDecline: logRefusals no longer logs a 409 on the hand-off
// route; serve's log must still say each declined hand-off (its Server.handoff line, at
// info), with why, and the refusals of other routes must still be logged.
func TestRedTeam48b_ServeSaysEveryDecline(t *testing.T) {
	requireBwrap(t)
	e := newEnv(t)
	serve := e.serve()
	t.Cleanup(func() { serve.Process.Kill(); serve.Wait() })
	hc := socketClient(filepath.Join(e.home, "orch", "orch.sock"))
	const n = 7
	for range n {
		resp, err := hc.Post("http://agora"+api.HandoffPath, "application/json",
			strings.NewReader(`{`+e.proved(filepath.Join(e.home, "orch", "orch.sock"))+`,"home":"/elsewhere","exe":"/bin/x","env":"e","subagent":"ok"}`))
		must(t, err)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusConflict {
			t.Fatalf("status %d, want 409", resp.StatusCode)
		}
	}
	// A malformed hand-off (400) on the same route stays a logged refusal.
	resp, err := hc.Post("http://agora"+api.HandoffPath, "application/json", strings.NewReader(`{}`))
	must(t, err)
	resp.Body.Close()
	must(t, serve.Process.Signal(syscall.SIGTERM))
	serve.Wait()
	log, _ := os.ReadFile(filepath.Join(e.home, "..", "serve.log"))
	if got := bytes.Count(log, []byte(`msg="hand-off declined"`)); got != n {
		t.Errorf("serve's log says %d of %d declined hand-offs:\n%s", got, n, log)
	}
	if !bytes.Contains(log, []byte(`why="serve's home is`)) {
		t.Errorf("serve's log does not say why the hand-offs were declined:\n%s", log)
	}
	if !bytes.Contains(log, []byte("status=400")) {
		t.Errorf("serve's log no longer says a malformed hand-off (400) was refused:\n%s", log)
	}
}

// TestRedTeam48b_ConcurrentListenOwners: Listen takes the identity it compares later
// (Own, RemoveSocket) from an Lstat of path after its rename. Two Listens of one path
// without the lock (a serve started while another starts, serve.lock removed; tests) both
// bind the one hidden name in turn; when the second renames onto path between the first's
// rename and its Lstat, both listeners record the second's socket: both say they Own it,
// and the first's RemoveSocket (when it stops) removes the second's live socket.
func TestRedTeam48b_ConcurrentListenOwners(t *testing.T) {
	var bothOwn, bothOK, oneFailed, rounds, deaf int
	for range 2000 {
		dir, err := os.MkdirTemp("", "rt48b")
		must(t, err)
		path := filepath.Join(dir, "orch.sock")
		var wg sync.WaitGroup
		lns := make([]*service.Listener, 2)
		errs := make([]error, 2)
		start := make(chan struct{})
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				lns[i], errs[i] = service.Listen(path)
			}()
		}
		close(start)
		wg.Wait()
		rounds++
		if errs[0] != nil || errs[1] != nil {
			oneFailed++
		}
		if errs[0] == nil && errs[1] == nil {
			bothOK++
			if lns[0].Own() && lns[1].Own() {
				bothOwn++
			}
		}
		// A Listen that returned a listener that Owns path must be the one a connection to
		// path reaches.
		for i, ln := range lns {
			if errs[i] != nil || !ln.Own() {
				continue
			}
			got := make(chan bool, 1)
			go func() {
				c, err := ln.Accept()
				if err == nil {
					c.Close()
				}
				got <- err == nil
			}()
			c, err := net.DialTimeout("unix", path, time.Second)
			if err == nil {
				c.Close()
			}
			select {
			case ok := <-got:
				if !ok || err != nil {
					deaf++
				}
			case <-time.After(500 * time.Millisecond):
				deaf++
			}
		}
		for _, ln := range lns {
			if ln != nil {
				ln.Close()
			}
		}
		os.RemoveAll(dir)
	}
	t.Logf("%d rounds: %d with a Listen failing, %d with both listening, %d with both owning path, %d owners a connection to path does not reach", rounds, oneFailed, bothOK, bothOwn, deaf)
	if deaf > 0 {
		t.Errorf("in %d of %d rounds a Listen returned a listener that Owns path yet no connection to path reaches it (its bound name was removed by the other Listen, whose socket it then renamed onto path)", deaf, rounds)
	}
	if bothOwn > 0 {
		t.Errorf("in %d of %d rounds two concurrent Listens of one path both Own() it (one file): the stale one's RemoveSocket removes the live one's socket", bothOwn, rounds)
	}
}

// TestRedTeam48b_HiddenNameOccupied: what is at a name of Listen's hidden form
// (.bound-NAME.HEX) before it runs: a directory (a same-user process's or an old tool's) is
// left alone, a socket (what a server killed inside Listen left) is removed, and Listen puts a
// working 0600 socket at path either way.
func TestRedTeam48b_HiddenNameOccupied(t *testing.T) {
	for _, kind := range []string{"empty directory", "directory with a file", "left socket"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			must(t, os.Chmod(dir, 0o700))
			path := filepath.Join(dir, "orch.sock")
			hidden := filepath.Join(dir, ".bound-orch.sock.0123456789abcdef")
			switch kind {
			case "empty directory":
				must(t, os.Mkdir(hidden, 0o700))
			case "directory with a file":
				must(t, os.Mkdir(hidden, 0o700))
				must(t, os.WriteFile(filepath.Join(hidden, "f"), []byte("keep"), 0o600))
			case "left socket":
				old, err := net.ListenUnix("unix", &net.UnixAddr{Name: hidden, Net: "unix"})
				must(t, err)
				old.SetUnlinkOnClose(false)
				old.Close()
			}
			ln, err := service.Listen(path)
			if err != nil {
				t.Fatalf("Listen with a %s at a hidden name: %v", kind, err)
			}
			defer ln.Close()
			fi, err := os.Lstat(path)
			must(t, err)
			if fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 || !ln.Own() {
				t.Errorf("with a %s at a hidden name, path is %v (own %v)", kind, fi.Mode(), ln.Own())
			}
			if err := acceptsAt(ln, path); err != nil {
				t.Errorf("with a %s at a hidden name: %v", kind, err)
			}
			_, err = os.Lstat(hidden)
			switch {
			case kind == "left socket" && err == nil:
				t.Errorf("the socket a killed Listen left is still there")
			case kind != "left socket" && err != nil:
				t.Errorf("the %s at a hidden name was removed: %v", kind, err)
			}
		})
	}
}

// TestRedTeam48b_ProcFdName: Listen binds through /proc/self/fd/N of the directory; the
// socket's own address is that name. Nothing must print or reuse ln.Addr() as if it were the
// socket's path (a CLI told to connect there reaches nothing once Listen returned), and the
// listener must accept at path.
func TestRedTeam48b_ProcFdName(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "orch.sock")
	ln, err := service.Listen(path)
	must(t, err)
	defer ln.Close()
	t.Logf("ln.Addr() = %q for path %q", ln.Addr().String(), path)
	c, err := net.DialTimeout("unix", path, time.Second)
	must(t, err)
	c.Close()
	if strings.HasPrefix(ln.Addr().String(), "/proc/self/fd/") {
		// Only a finding if a caller shows or dials it: grep the callers.
		out, _ := exec.Command("grep", "-rn", "--include=*.go", "-e", "ln.Addr()", "../../cli/orch/serve.go", "../../cli/dispatchcmd/resident.go").CombinedOutput()
		if len(bytes.TrimSpace(out)) > 0 {
			t.Errorf("a caller of Listen uses ln.Addr(), which is %q, not %q:\n%s", ln.Addr(), path, out)
		}
	}
}
