package workerbin

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// The exec-only worker is looked for by name beside agora-worker (ExecBeside) and is optional,
// so usually absent. checkFile and openDir count a sticky directory as one only a file's owner
// may replace files in: in a sticky, world-writable directory (a worker installed in /tmp, or
// AGORA_WORKER_BINARY=/tmp/agora-worker) any local user may create agora-worker-exec first.
// PinBeside refuses it unless the worker's owner owns it too; Pin alone, which has no worker
// to compare with, would take it (the comparison is the defence this test holds).
func TestRedTeam47W_PinBesideRefusesExecWorkerAnotherUserCreatedInStickyDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP: needs root to act as another uid")
	}
	base := t.TempDir()
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(base), 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(base, "tmpish")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(workerBin)
	if err != nil {
		t.Fatal(err)
	}
	worker := filepath.Join(dir, Name)
	if err := os.WriteFile(worker, b, 0o755); err != nil {
		t.Fatal(err)
	}
	p := &Pinner{Dir: filepath.Join(t.TempDir(), DirName)}
	pinned, err := p.Pin(context.Background(), worker, true)
	if err != nil {
		t.Fatalf("agora-worker, root's, in the sticky directory: %v", err)
	}
	// uid 65534 creates the exec-only worker's name, which nobody had taken (from a build
	// of its own: here a copy of the worker readable to it).
	src := filepath.Join(base, "src")
	if err := os.WriteFile(src, b, 0o755); err != nil {
		t.Fatal(err)
	}
	execPath := ExecBeside(worker)
	plant := exec.Command("sh", "-c", `cp "$1" "$2" && chmod 0755 "$2"`, "sh", src, execPath)
	plant.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if out, err := plant.CombinedOutput(); err != nil {
		t.Fatalf("uid 65534 plants %s: %v\n%s", execPath, err, out)
	}
	st, err := os.Stat(execPath)
	if err != nil {
		t.Fatal(err)
	}
	if uid := st.Sys().(*syscall.Stat_t).Uid; uid != 65534 {
		t.Fatalf("planted file's owner %d", uid)
	}
	got, err := p.PinBeside(context.Background(), pinned, execPath)
	if err == nil {
		t.Fatalf("PinBeside took %s, created by uid 65534 (who may rewrite it at will) in the sticky directory %s: pinned %s", execPath, dir, got.Path)
	}
	if !strings.Contains(err.Error(), "owned by uid 65534, not uid 0") || !strings.Contains(err.Error(), "make install") {
		t.Errorf("PinBeside's refusal %q does not say whose the file is and the fix", err)
	}
	// The worker's owner's file at that name is taken.
	if err := os.Remove(execPath); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(execPath, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := p.PinBeside(context.Background(), pinned, execPath); err != nil {
		t.Errorf("PinBeside of root's file beside root's worker: %v", err)
	}
}

// A weakened exec-only worker (-tags agora_worker_exec,agora_weaken: selftest's control
// build plus the exec tag) is refused by an agora built without the weaken tag, though its
// tags are a list now: version.Weakened splits -tags on commas. Were it compared whole (as
// "agora_weaken" alone), the combined build would pass as a real worker.
func TestRedTeam47W_WeakenedExecOnlyWorkerIsRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIP: -short: builds the worker with two tags")
	}
	if Self().Tags != "" {
		t.Skip("SKIP: this test binary was built with tags")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, ExecName)
	build := exec.Command("go", "build", "-trimpath", "-tags", "agora_worker_exec,agora_weaken", "-o", bin, "github.com/agora-dev/agora/cmd/agora-worker")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	p := &Pinner{Dir: filepath.Join(t.TempDir(), DirName)}
	_, err := p.Pin(context.Background(), bin, false)
	var me *MismatchError
	if !errors.As(err, &me) {
		t.Fatalf("Pin of a weakened exec-only worker: %v, want a MismatchError", err)
	}
}
