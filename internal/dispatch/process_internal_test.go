package dispatch

import (
	"fmt"
	"os/exec"
	"testing"
	"time"
)

// TestSupervisorAlive_Zombie: a supervisor killed but not yet reaped by its parent (a zombie:
// an MCP server killed under a client that has not waited for it) supervises nothing, and
// its sandbox died with it (--die-with-parent). Reap must see it gone, or the dispatches it
// accepted stay accepted with nobody to start them.
func TestSupervisorAlive_Zombie(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	start, err := processStart(pid)
	if err != nil {
		t.Fatal(err)
	}
	s := fmt.Sprintf("%d:%d", pid, start)
	if !supervisorAlive(s) {
		t.Fatalf("a running process %s is not alive", s)
	}
	cmd.Process.Kill()
	// Not waited: the process stays a zombie until cmd.Wait below.
	for deadline := time.Now().Add(5 * time.Second); supervisorAlive(s); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("killed process %s (a zombie, not reaped) is still alive to supervisorAlive", s)
		}
	}
	cmd.Wait()
	if supervisorAlive(s) {
		t.Errorf("reaped process %s is alive", s)
	}
}
