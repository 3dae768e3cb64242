package internal_test

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// redteam47wExecWorker is the exec-only worker: make build's (AGORA_TEST_BUILT) or built here.
func redteam47wExecWorker(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("AGORA_TEST_BUILT"); dir != "" {
		if p := filepath.Join(dir, "agora-worker-exec"); redteam47wFileExists(p) {
			return p
		}
	}
	if testing.Short() {
		t.Skip("SKIP: -short: builds cmd/agora-worker with the agora_worker_exec tag")
	}
	bin := filepath.Join(t.TempDir(), "agora-worker-exec")
	build := exec.Command("go", "build", "-trimpath", "-tags", "agora_worker_exec", "-o", bin, "../cmd/agora-worker")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the exec-only worker: %v\n%s", err, out)
	}
	return bin
}

func redteam47wFileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// The exec-only worker started as a pod's worker (AGORA_GATEWAY_URL set: what a
// kubernetes or docker-warm target's worker sees) refuses with a message naming itself, and
// never dials the gateway nor runs anything of the bundle. Defence: remotemode_exec.go
// (remoteMode reads the same variable as workerremote.Enabled, and runRemote refuses).
// Without it the worker would take the local sandbox layout in a pod.
func TestRedTeam47W_ExecWorkerInAPodRefusesWithoutDialling(t *testing.T) {
	bin := redteam47wExecWorker(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	root := t.TempDir() // a sandbox: none layout, empty: nothing to verify or run
	cmd := exec.Command(bin, "worker")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "AGORA_GATEWAY_URL=http://" + ln.Addr().String(), "AGORA_WORKER_ROOT=" + root}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 1 {
		t.Fatalf("agora-worker-exec worker in a pod: %v, stderr %q; want exit 1", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "exec-only worker (agora-worker-exec), which runs in a local sandbox only") {
		t.Errorf("stderr %q does not say it is the exec-only worker", stderr.String())
	}
	// The process has exited: a connection it made is queued already.
	if err := ln.(*net.TCPListener).SetDeadline(time.Now()); err != nil {
		t.Fatal(err)
	}
	if c, err := ln.Accept(); err == nil {
		c.Close()
		t.Error("the exec-only worker dialled the pod's gateway")
	}
	if entries, _ := os.ReadDir(root); len(entries) > 1 { // tmp/ at most
		t.Errorf("the worker wrote into its root: %v", entries)
	}
}
