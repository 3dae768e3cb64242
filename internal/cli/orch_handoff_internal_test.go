package cli

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestPeerHelper is the process TestPeerNotDispatchRun reads: it waits while its parent
// looks at its command line.
func TestPeerHelper(t *testing.T) {
	if os.Getenv("AGORA_PEER_HELPER") == "" {
		t.Skip("SKIP: only a helper process for TestPeerNotDispatchRun")
	}
	time.Sleep(30 * time.Second)
}

// TestPeerNotDispatchRun: serve takes a hand-off (and so a learn dispatch) only from this
// agora binary running `dispatch run`: the MCP server (`agora mcp serve`, the same user and
// binary), another program, or a process that is gone are declined.
func TestPeerNotDispatchRun(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	start := func(words ...string) *exec.Cmd {
		c := exec.Command(exe, append([]string{"-test.run=^TestPeerHelper$"}, words...)...)
		c.Env = append(os.Environ(), "AGORA_PEER_HELPER=1")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
		return c
	}
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
