package dispatchcmd

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
)

// TestPeerHelper is the process TestPeerNotDispatchRun reads: it waits while its parent
// looks at its command line, until its parent kills it.
func TestPeerHelper(t *testing.T) {
	if os.Getenv("AGORA_PEER_HELPER") == "" {
		t.Skip("SKIP: only a helper process for TestPeerNotDispatchRun")
	}
	agoratest.Hang() // until the test kills it
}

// startPeer starts bin as the helper process with words, named argv0, and returns once the
// kernel shows its command line: exec.Cmd.Start returns when the close-on-exec pipe closes,
// which is before the new program's arguments are set up, and /proc/PID/cmdline reads empty
// in between.
func startPeer(t *testing.T, bin, argv0 string, words ...string) *exec.Cmd {
	t.Helper()
	c := exec.Command(bin, append([]string{"-test.run=^TestPeerHelper$"}, words...)...)
	c.Args[0] = argv0
	c.Env = append(os.Environ(), "AGORA_PEER_HELPER=1")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	cmdline := "/proc/" + strconv.Itoa(c.Process.Pid) + "/cmdline"
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if b, err := os.ReadFile(cmdline); err == nil && len(b) > 0 {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("the helper process %d shows no command line", c.Process.Pid)
		}
	}
}

// TestPeerNotDispatchRun: serve takes a hand-off (and so a learn dispatch) only from this
// agora binary running `dispatch run`: the MCP server (`agora mcp serve`, the same user and
// binary), another program, or a process that is gone are declined.
func TestPeerNotDispatchRun(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	start := func(words ...string) *exec.Cmd { return startPeer(t, exe, exe, words...) }
	run := start("dispatch", "run")
	if why := peerNotDispatchRun(int32(run.Process.Pid), exe); why != "" {
		t.Errorf("`dispatch run` declined: %s", why)
	}
	mcp := start("mcp", "serve")
	if why := peerNotDispatchRun(int32(mcp.Process.Pid), exe); why == "" {
		t.Error("`mcp serve` may hand off (and so learn)")
	}
	if why := peerNotDispatchRun(int32(run.Process.Pid), "/usr/bin/agora-other"); why == "" {
		t.Error("another binary may hand off")
	}
	if why := peerNotDispatchRun(0, exe); why == "" {
		t.Error("an unknown peer may hand off")
	}
	gone := start("dispatch", "run")
	gone.Process.Kill()
	gone.Wait()
	if why := peerNotDispatchRun(int32(gone.Process.Pid), exe); why == "" {
		t.Error("a process that is gone may hand off")
	}
}

// TestPeerNotDispatchRun_Front: the front (cmd/agora) installed beside the whole program
// serve runs as hands off for a person's `agora dispatch run`; a program named agora anywhere
// else (a planted one in another directory) is declined.
func TestPeerNotDispatchRun_Front(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	place := func(path string) {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if os.Link(exe, path) == nil {
			return
		}
		src, err := os.Open(exe)
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		dst, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o755)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(dst, src); err != nil {
			t.Fatal(err)
		}
		if err := dst.Close(); err != nil {
			t.Fatal(err)
		}
	}
	front, planted := filepath.Join(dir, "bin", "agora"), filepath.Join(dir, "evil", "agora")
	place(front)
	place(planted)
	// argv[0] is not "agora": what the check reads is /proc/PID/exe, which names the file
	// placed as agora whatever the process calls itself.
	start := func(bin string) *exec.Cmd { return startPeer(t, bin, "peer-helper", "dispatch", "run") }
	full := filepath.Join(dir, "bin", "agora-full")
	if why := peerNotDispatchRun(int32(start(front).Process.Pid), full); why != "" {
		t.Errorf("the front beside serve's program declined: %s", why)
	}
	if why := peerNotDispatchRun(int32(start(planted).Process.Pid), full); why == "" {
		t.Error("an agora in another directory may hand off")
	}
}
