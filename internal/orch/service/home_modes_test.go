package service_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// orch/orch.db and its WAL files were 0644, and `agora orch patches
// --to DIR` wrote through a symbolic link already in DIR.

// usualUmask runs the test, and every agora it starts, under umask 022, the usual default,
// under which a file created with the process's default mode comes out 0644.
func usualUmask(t *testing.T) {
	t.Helper()
	old := syscall.Umask(0o022)
	t.Cleanup(func() { syscall.Umask(old) })
}

// pinnedWorker reports whether rel is a worker copy agora pinned: bin/agora-worker-<sha256>.
func pinnedWorker(rel string) bool {
	name, ok := strings.CutPrefix(rel, "bin/agora-worker-")
	return ok && len(name) == 64 && strings.Trim(name, "0123456789abcdef") == ""
}

// stagedCapabilities reports whether rel is a dispatch's staged capability layout or a
// directory in it: dispatches/<id>/capabilities[/...].
func stagedCapabilities(rel string) bool {
	parts := strings.Split(rel, string(filepath.Separator))
	return len(parts) >= 3 && parts[0] == "dispatches" && parts[2] == "capabilities"
}

// privateHome walks home and returns every entry open to anyone but its owner: a directory
// that is not exactly 0700, a file or socket with any group or other bit (0600 and the
// blobs' 0400 pass; a socket's mode is checked like a file's), and anything else (a link, a
// fifo, a device), which agora never makes there.
func privateHome(t *testing.T, home string) []string {
	t.Helper()
	var bad []string
	err := filepath.WalkDir(home, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while walking: a WAL file, a finished dispatch's workspace
			}
			return err
		}
		fi, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(home, path)
		m := fi.Mode()
		switch {
		case m.IsDir() && stagedCapabilities(rel) && m.Perm() == 0o500 && m&(fs.ModeSetgid|fs.ModeSticky|fs.ModeSetuid) == 0:
			// A dispatch's capability files as staged for its sandbox (dispatch's capfiles.go):
			// read-only, the owner's alone, until the stage is removed, which may be just
			// after its record says it ended.
		case m.IsDir():
			if m.Perm() != 0o700 || m&(fs.ModeSetgid|fs.ModeSticky|fs.ModeSetuid) != 0 {
				bad = append(bad, fmt.Sprintf("%s: directory %v, want drwx------", rel, m))
			}
		case m.IsRegular() && pinnedWorker(rel) && m.Perm() == 0o555:
			// The pinned worker: a public program, no secret, in AGORA_HOME/bin (0700,
			// checked above), so no one else reaches it on the host; a root agora's sandbox
			// runs as its own uid and executes it through its read-only bind.
		case m.IsRegular(), m.Type() == fs.ModeSocket:
			if m.Perm()&0o077 != 0 || m&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
				bad = append(bad, fmt.Sprintf("%s: %v, want 0600 or stricter", rel, m))
			}
		default:
			bad = append(bad, fmt.Sprintf("%s: %v, a kind of file agora never makes in its home", rel, m))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", home, err)
	}
	return bad
}

// TestHome_PrivateAfterUse uses a real AGORA_HOME as a person would (init, catalog apply,
// a dispatch, an `agora orch serve` running a plan, an audit checkpoint) and walks it twice:
// while serve runs (orch.db's -wal and -shm and the socket exist) and after it stopped.
func TestHome_PrivateAfterUse(t *testing.T) {
	requireBwrap(t)
	usualUmask(t)
	e := newEnv(t) // agora init, agora apply
	serve := e.serve()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			serve.Process.Signal(syscall.SIGTERM)
			serve.Wait()
		}
	})
	e.run("dispatch", "run", "--subagent", "worker", "--input", `{"n":1}`)
	planPath := filepath.Join(t.TempDir(), "p.yaml")
	must(t, os.WriteFile(planPath, []byte("version: 1\nname: modes\ntasks:\n  - {id: one, subagent: worker, input: {n: 2}}\n"), 0o644))
	e.run("orch", "submit", planPath, "--wait")
	e.run("audit", "checkpoint")
	for _, f := range []string{"orch/orch.db-wal", "orch/orch.db-shm", "orch/orch.sock"} {
		if _, err := os.Lstat(filepath.Join(e.home, f)); err != nil {
			t.Errorf("while serve runs: %v (the walk would not see it)", err)
		}
	}
	for _, b := range privateHome(t, e.home) {
		t.Errorf("while serve runs: %s", b)
	}
	must(t, serve.Process.Signal(syscall.SIGTERM))
	must(t, serve.Wait())
	stopped = true
	for _, b := range privateHome(t, e.home) {
		t.Errorf("after serve stopped: %s", b)
	}
}

// TestOrchPatches_NeverFollowsALink plants, where `agora orch patches --to DIR` writes, a link
// to a file outside DIR and a dangling link: each is refused with a clear error and nothing
// is written through it. With the links gone the patches are written 0600, and a rerun
// succeeds.
func TestOrchPatches_NeverFollowsALink(t *testing.T) {
	e := servedEnv(t)
	usualUmask(t)
	planPath := filepath.Join(t.TempDir(), "p.yaml")
	must(t, os.WriteFile(planPath, []byte("version: 1\nname: patches\ntasks:\n  - {id: a, subagent: worker, input: {n: 1}}\n  - {id: b, subagent: worker, input: {n: 2}}\n"), 0o644))
	runID := strings.TrimSpace(strings.Split(e.run("orch", "submit", planPath), "\n")[0])
	waitRun(t, e.client(), runID, time.Minute)

	root := t.TempDir()
	review, outside := filepath.Join(root, "review"), filepath.Join(root, "outside")
	must(t, os.Mkdir(review, 0o755))
	must(t, os.Mkdir(outside, 0o755))
	victim := filepath.Join(outside, "victim")
	must(t, os.WriteFile(victim, []byte("original\n"), 0o644))
	must(t, os.Symlink(victim, filepath.Join(review, "a.patch")))
	must(t, os.Symlink(filepath.Join(outside, "new"), filepath.Join(review, "b.patch")))

	// a.patch is a link to a file outside.
	out := e.runFail("orch", "patches", runID, "--to", review)
	if !strings.Contains(out, "refusing to write "+filepath.Join(review, "a.patch")+": it is a symbolic link") || !strings.Contains(out, "agora: hint:") {
		t.Errorf("a link to a file: want a clear refusal and a hint, got:\n%s", out)
	}
	// b.patch is a dangling link.
	must(t, os.Remove(filepath.Join(review, "a.patch")))
	out = e.runFail("orch", "patches", runID, "--to", review)
	if !strings.Contains(out, "refusing to write "+filepath.Join(review, "b.patch")+": it is a symbolic link") {
		t.Errorf("a dangling link: want a clear refusal, got:\n%s", out)
	}
	if b, _ := os.ReadFile(victim); string(b) != "original\n" {
		t.Errorf("the file outside now holds %q: a patch was written through the link", b)
	}
	if _, err := os.Lstat(filepath.Join(outside, "new")); err == nil {
		t.Errorf("the dangling link's target was created")
	}

	must(t, os.Remove(filepath.Join(review, "b.patch")))
	e.run("orch", "patches", runID, "--to", review)
	e.run("orch", "patches", runID, "--to", review) // a rerun over the same patches
	for _, name := range []string{"a.patch", "b.patch"} {
		fi, err := os.Lstat(filepath.Join(review, name))
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v (%v), want a regular 0600 file", name, fi, err)
			continue
		}
		if b, _ := os.ReadFile(filepath.Join(review, name)); !strings.Contains(string(b), "task.json") {
			t.Errorf("%s does not hold the task's patch:\n%s", name, b)
		}
	}
	// A new --to directory is made 0700.
	fresh := filepath.Join(root, "fresh", "review")
	e.run("orch", "patches", runID, "--to", fresh)
	if fi, err := os.Stat(fresh); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("a new --to directory: %v (%v), want 0700", fi, err)
	}
}

// runFail runs agora with args, expects exit code 1, and returns its combined output.
func (e *env) runFail(args ...string) string {
	e.t.Helper()
	return e.runFailCode(1, args...)
}

// exitInvalid is the CLI's exit code for input that failed validation (a plan).
const exitInvalid = 7

// runFailCode runs agora with args, expects exit code code, and returns its combined output.
func (e *env) runFailCode(code int, args ...string) string {
	e.t.Helper()
	cmd := exec.Command(agoraBin, args...)
	cmd.Env = e.vars
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != code {
		e.t.Fatalf("agora %s: %v, want exit code %d\n%s", strings.Join(args, " "), err, code, out)
	}
	return string(out)
}
