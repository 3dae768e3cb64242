package k8stest

import (
	"bufio"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
)

// TestOwnClusterRestartAndStop starts a cluster of its own, kills and restarts its apiserver
// (what a crash-safety test of a provider does) and checks that Stop leaves no process and no
// files behind.
func TestOwnClusterRestartAndStop(t *testing.T) {
	c := Start(t, Options{Namespace: "restart"})
	t.Logf("start time %s", c.StartTime)
	ctx := t.Context()
	cm := map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "kept"}, "data": map[string]string{"k": "v"}}
	if err := c.Do(ctx, http.MethodPost, "/api/v1/namespaces/restart/configmaps", cm, nil); err != nil {
		t.Fatal(err)
	}

	c.KillAPIServer()
	if err := c.Do(ctx, http.MethodGet, "/api/v1/namespaces/restart/configmaps/kept", nil, nil); err == nil {
		t.Fatal("the apiserver answered after KillAPIServer")
	}
	begin := time.Now()
	if err := c.RestartAPIServer(); err != nil {
		t.Fatalf("restart: %v\n%s", err, c.Log("kube-apiserver"))
	}
	t.Logf("apiserver restarted in %s", time.Since(begin))
	if err := c.Do(ctx, http.MethodGet, "/api/v1/namespaces/restart/configmaps/kept", nil, nil); err != nil {
		t.Fatalf("the ConfigMap did not survive the restart (etcd kept running): %v", err)
	}

	var pids []int
	for _, p := range c.procs {
		pids = append(pids, p.cmd.Process.Pid)
	}
	c.Stop()
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("pid %d still runs after Stop", pid)
		}
	}
	if _, err := os.Stat(c.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still exists after Stop (%v)", c.Dir, err)
	}
	c.Stop() // a second Stop (the test's cleanup) must be harmless
}

// alive reports whether pid runs and is not a zombie waiting for its parent.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

// TestChildrenDieWithTestBinary kills a test binary that started a component (here sleep,
// spawned exactly as the apiserver is) with SIGKILL, as go test's timeout or a CI cancel does,
// and checks the component died with it.
func TestChildrenDieWithTestBinary(t *testing.T) {
	if os.Getenv("K8STEST_CHILD") == "1" {
		p := newProc(t.TempDir(), "sleep", []string{"sleep", "600"})
		if err := p.start(); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("pid %d\n", p.cmd.Process.Pid)
		agoratest.Hang() // until the test kills it
	}
	if _, err := exec.LookPath("sleep"); err != nil {
		t.Skip("SKIP: no sleep in PATH")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestChildrenDieWithTestBinary$", "-test.timeout=11m")
	// The child is killed, so its own temporary directories are made in this test's.
	cmd.Env = append(os.Environ(), "K8STEST_CHILD=1", "TMPDIR="+t.TempDir())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("child: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "pid ")))
	if err != nil {
		t.Fatalf("child said %q", line)
	}
	if !alive(pid) {
		t.Fatalf("sleep %d is not running while its parent lives", pid)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("sleep %d outlived the test binary that started it", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSkipsWithoutBinaries: an empty binary directory is a loud skip naming the script, not a
// failure and not a silent pass.
func TestSkipsWithoutBinaries(t *testing.T) {
	t.Setenv("AGORA_K8S_BIN", t.TempDir())
	_, err := start(t, Options{})
	var skip *skipError
	if !errors.As(err, &skip) {
		t.Fatalf("start without binaries: %v, want a skip", err)
	}
	for _, want := range []string{"SKIP: ", "kube-apiserver", "kwok", "scripts/k8s-tools.sh"} {
		if !strings.Contains(skip.Error(), want) {
			t.Errorf("skip message %q lacks %q", skip, want)
		}
	}
}
