package dispatch

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestParentSupervisor_PidOne: a supervisor spawned by a process that is pid 1 (`agora
// orch serve` as a container's first process, deploy/kubernetes) names that parent, so its
// Claim takes over the dispatch serve accepted. Before, pid 1 counted as "no parent": the
// claim saw the dispatch held by serve, alive, and every supervisor serve spawned in a pod
// exited without starting the worker. The test runs the test binary as pid 1 of a new pid
// namespace (unshare, as root), which spawns itself as the child.
func TestParentSupervisor_PidOne(t *testing.T) {
	switch os.Getenv("AGORA_TEST_PID1_ROLE") {
	case "child":
		fmt.Printf("PARENT=%s\n", parentSupervisor())
		return
	case "init":
		fmt.Printf("INIT=%s\n", selfSupervisor())
		out, err := pid1Exec("child")
		if err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		os.Stdout.Write(out)
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("SKIP: a new pid namespace (unshare --pid) needs root")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("SKIP: unshare (util-linux) is missing")
	}
	cmd := exec.Command("unshare", "--pid", "--fork", "--mount-proc", os.Args[0], "-test.run=^TestParentSupervisor_PidOne$", "-test.v")
	cmd.Env = append(os.Environ(), "AGORA_TEST_PID1_ROLE=init")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("unshare: %v\n%s", err, out)
	}
	var init, parent string
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "INIT="); ok {
			init = v
		}
		if v, ok := strings.CutPrefix(line, "PARENT="); ok {
			parent = v
		}
	}
	if !strings.HasPrefix(init, "1:") {
		t.Fatalf("the init process is not pid 1 (%q): the test proves nothing\n%s", init, out)
	}
	if parent != init {
		t.Errorf("a child of pid 1 names its parent %q, want %q (the pid 1 process that spawned it)", parent, init)
	}
}

// pid1Exec runs the test binary again in role, returning its output.
func pid1Exec(role string) ([]byte, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestParentSupervisor_PidOne$")
	cmd.Env = append(os.Environ(), "AGORA_TEST_PID1_ROLE="+role)
	return cmd.CombinedOutput()
}
