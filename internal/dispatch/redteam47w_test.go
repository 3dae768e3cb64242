package dispatch_test

// Attacks on the optional exec-only worker (agora-worker-exec) that an exec dispatch on a
// local target without warm slots binds instead of agora-worker when it is beside it.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/runtime/openairt/openaitest"
	"github.com/agora-dev/agora/internal/workerbin"
)

// redteam47wCopy copies src to dst with mode, owned by uid (-1: unchanged).
func redteam47wCopy(t *testing.T, src, dst string, mode os.FileMode, uid int) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dst, mode); err != nil {
		t.Fatal(err)
	}
	if uid >= 0 {
		if err := os.Chown(dst, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
}

// redteam47wInstall makes a directory (mode dirMode) holding a copy of agora-worker, sets it
// as the dispatcher's worker, with the exec-only worker looked for beside it, as
// cli.workerBinary sets them; it returns the directory.
func redteam47wInstall(t *testing.T, e *env, dirMode os.FileMode) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "install")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	redteam47wCopy(t, agoratest.Worker(agoraBin), filepath.Join(dir, workerbin.Name), 0o755, -1)
	if err := os.Chmod(dir, dirMode); err != nil {
		t.Fatal(err)
	}
	e.d.Worker.Path = filepath.Join(dir, workerbin.Name)
	e.d.Worker.Exec = workerbin.ExecBeside(e.d.Worker.Path)
	return dir
}

// redteam47wNotRun fails t unless r failed provider-failed before its sandbox started, with
// a detail holding every one of says.
func redteam47wNotRun(t *testing.T, r *dispatch.Record, marker string, says ...string) {
	t.Helper()
	if r.State != lifecycle.DispatchFailed || r.Reason != lifecycle.ReasonProviderFailed {
		t.Fatalf("state %s (%s: %s), want failed provider-failed", r.State, r.Reason, r.Detail)
	}
	for _, s := range says {
		if !strings.Contains(r.Detail, s) {
			t.Errorf("detail %q does not say %q", r.Detail, s)
		}
	}
	if r.StartedAt != nil || r.WorkerBinary != nil {
		t.Errorf("the dispatch started (%v) or recorded a worker (%+v)", r.StartedAt, r.WorkerBinary)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the agent ran")
	}
}

// The pin counts a sticky directory as one only a file's owner may replace a file in
// (workerbin.openDir): sound for agora-worker, which must be there, so nobody else can create
// it. agora-worker-exec is optional and usually absent, and in a sticky world-writable
// directory any local user may create it, here a Go program whose build information names
// cmd/agora-worker (a real build of other source). The dispatch fails closed, saying whose
// the file is: workerbin.Pinner.PinBeside takes only a file the worker's owner owns.
func TestRedTeam47W_StickyDirPlantedExecWorkerIsRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP: needs root to plant a file owned by another uid")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("SKIP: no go toolchain to build the planted worker")
	}
	e := newEnv(t)
	dir := redteam47wInstall(t, e, 0o777|os.ModeSticky) // like /tmp: sticky, world-writable
	// Its ancestors open for traversal, as an installed directory's are: uid 65534 reaches it.
	for d := filepath.Dir(dir); d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The attacker's worker: cmd/agora-worker's package path, its own main.
	src := filepath.Join(t.TempDir(), "main.go")
	if err := os.WriteFile(src, []byte(`package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintf(os.Stderr, "REDTEAM47W planted worker ran as uid %d\n", os.Getuid())
	fmt.Fprintf(os.Stdout, "REDTEAM47W planted worker ran as uid %d\n", os.Getuid())
	os.Exit(0)
}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	overlay := filepath.Join(t.TempDir(), "overlay.json")
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(overlay, []byte(`{"Replace":{"`+filepath.Join(root, "cmd/agora-worker/main.go")+`":"`+src+`"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	built := filepath.Join(filepath.Dir(dir), "evil")
	build := exec.Command("go", "build", "-trimpath", "-tags", "agora_worker_exec", "-overlay", overlay, "-o", built, "./cmd/agora-worker")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the planted worker: %v\n%s", err, out)
	}
	if err := os.Chmod(built, 0o755); err != nil {
		t.Fatal(err)
	}
	// Planted by uid 65534 (nobody), itself: any user may create a new name in a sticky
	// directory.
	plant := exec.Command("sh", "-c", `cp "$1" "$2" && chmod 0755 "$2"`, "sh", built, e.d.Worker.Exec)
	plant.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if out, err := plant.CombinedOutput(); err != nil {
		t.Fatalf("uid 65534 plants %s: %v\n%s", e.d.Worker.Exec, err, out)
	}
	planted := fileSHA(t, e.d.Worker.Exec)

	marker := filepath.Join(t.TempDir(), "ran")
	e.subagent("toucher", "touch "+marker+"; echo agent")
	r := e.run(dispatch.Request{Subagent: "toucher"})
	if wb := r.WorkerBinary; wb != nil && wb.SHA256 == planted {
		logs := ""
		if r.Result != nil && r.Result.Stderr != nil {
			logs = e.stderr(r)
		}
		t.Fatalf("the exec dispatch bound agora-worker-exec planted by uid 65534 in the sticky directory %s (worker_binary %s, %s %s: %s); its stderr: %q",
			dir, wb.SHA256, r.State, r.Reason, r.Detail, logs)
	}
	redteam47wNotRun(t, r, marker, "owned by uid 65534, not uid 0", e.d.Worker.Exec)
}

// A FIFO at agora-worker-exec fails the dispatch at once: the pin refuses what is not a
// regular file before it opens it (workerbin.checkFile's IsRegular). Without that check the
// open blocks for ever, for a writer that never comes, and this test hangs.
func TestRedTeam47W_FIFOAtExecNameFailsClosedWithoutHanging(t *testing.T) {
	e := newEnv(t)
	redteam47wInstall(t, e, 0o755)
	if err := syscall.Mkfifo(e.d.Worker.Exec, 0o755); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "ran")
	e.subagent("toucher", "touch "+marker)
	r := e.run(dispatch.Request{Subagent: "toucher"})
	redteam47wNotRun(t, r, marker, e.d.Worker.Exec, "not a regular file")
}

// A dangling symlink at agora-worker-exec is there (Lstat), so it fails the dispatch rather
// than being passed over for agora-worker: the defence is workerBinary's Lstat (an os.Stat
// would call it absent and bind agora-worker silently).
func TestRedTeam47W_DanglingSymlinkFailsClosed(t *testing.T) {
	e := newEnv(t)
	redteam47wInstall(t, e, 0o755)
	if err := os.Symlink(filepath.Join(t.TempDir(), "gone"), e.d.Worker.Exec); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "ran")
	e.subagent("toucher", "touch "+marker)
	r := e.run(dispatch.Request{Subagent: "toucher"})
	redteam47wNotRun(t, r, marker, e.d.Worker.Exec)
}

// Another agora program (agora-full), a shell script or a directory at agora-worker-exec
// fails the dispatch: the pin checks the main package path in the build information
// (workerbin.checkBuild) and that it is a regular file (checkFile).
func TestRedTeam47W_OtherProgramsAtExecNameFailClosed(t *testing.T) {
	for _, c := range []struct {
		name string
		make func(t *testing.T, path string)
		says string
	}{
		{"symlink to agora-full", func(t *testing.T, path string) {
			if err := os.Symlink(filepath.Join(filepath.Dir(agoraBin), "agora-full"), path); err != nil {
				t.Fatal(err)
			}
		}, "cmd/agora-full"},
		{"shell script", func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte("#!/bin/sh\nexec /bin/sh -c \"$*\"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}, "not a Go program with build information"},
		{"directory", func(t *testing.T, path string) {
			if err := os.Mkdir(path, 0o755); err != nil {
				t.Fatal(err)
			}
		}, "not a regular file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			redteam47wInstall(t, e, 0o755)
			c.make(t, e.d.Worker.Exec)
			marker := filepath.Join(t.TempDir(), "ran")
			e.subagent("toucher", "touch "+marker)
			r := e.run(dispatch.Request{Subagent: "toucher"})
			redteam47wNotRun(t, r, marker, c.says)
		})
	}
}

// agora-worker-exec as a symlink, from agora-worker's safe directory, to a sound exec-only
// worker in a group-writable directory fails the dispatch: the pin checks the directories of
// the link's target too (workerbin.openDir's EvalSymlinks).
func TestRedTeam47W_SymlinkIntoGroupWritableDirFailsClosed(t *testing.T) {
	e := newEnv(t)
	redteam47wInstall(t, e, 0o755)
	open := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(open, 0o755); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(open, workerbin.ExecName)
	redteam47wCopy(t, agoratest.ExecWorker(agoraBin), target, 0o755, -1)
	if err := os.Chmod(open, 0o775); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, e.d.Worker.Exec); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "ran")
	e.subagent("toucher", "touch "+marker)
	r := e.run(dispatch.Request{Subagent: "toucher"})
	redteam47wNotRun(t, r, marker, "writable by its group or others", open)
}

// The record names what the sandbox ran, across a replacement of agora-worker-exec between
// two dispatches: the sandbox hashes its own /agora/bin/agora-worker, which must be the
// record's digest and the file's current bytes. Defence: the pin binds the copy of the bytes
// it hashed, and its cache is keyed by the file's identity (inode, size, mtime, ctime), so a
// replaced file is read again; a cache keyed by path would bind and record the old worker.
func TestRedTeam47W_RecordNamesWhatTheSandboxRanAcrossReplacement(t *testing.T) {
	if _, err := exec.LookPath("sha256sum"); err != nil {
		t.Skip("SKIP: no sha256sum")
	}
	e := newEnv(t)
	dir := redteam47wInstall(t, e, 0o755)
	redteam47wCopy(t, agoratest.ExecWorker(agoraBin), e.d.Worker.Exec, 0o755, -1)
	e.subagent("hasher", "sha256sum /agora/bin/agora-worker")
	check := func(want string) {
		t.Helper()
		r := e.run(dispatch.Request{Subagent: "hasher"})
		if r.State != lifecycle.DispatchFinished {
			t.Fatalf("state %s (%s: %s)", r.State, r.Reason, r.Detail)
		}
		ran := strings.Fields(e.stdout(r))
		if len(ran) == 0 || r.WorkerBinary == nil || ran[0] != r.WorkerBinary.SHA256 || ran[0] != want {
			t.Fatalf("the sandbox ran %v, the record says %+v, the installed file is %s", ran, r.WorkerBinary, want)
		}
	}
	check(fileSHA(t, agoratest.ExecWorker(agoraBin)))
	// Replaced by agora-worker's bytes (rename over it: a new inode), then rewritten in place
	// to the exec-only worker's again (same inode, new ctime).
	tmp := filepath.Join(dir, ".new")
	redteam47wCopy(t, agoratest.Worker(agoraBin), tmp, 0o755, -1)
	if err := os.Rename(tmp, e.d.Worker.Exec); err != nil {
		t.Fatal(err)
	}
	check(fileSHA(t, agoratest.Worker(agoraBin)))
	b, err := os.ReadFile(agoratest.ExecWorker(agoraBin))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(e.d.Worker.Exec, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	check(fileSHA(t, agoratest.ExecWorker(agoraBin)))
}

// agora-worker itself installed as the exec-only build (go install -tags agora_worker_exec
// ./cmd/agora-worker): the pin takes it (same main package), so a model dispatch binds it.
// It fails closed in the worker's verify, before any setup script or agent runs and before a
// single model call: the exec-only build's adapter table has exec's alone
// (adapters_exec.go; worker.runtimeFor). Learn too (workerkey_exec.go is never reached
// unverified). Without that, the dispatch would run a model runtime with no gateway claim.
func TestRedTeam47W_ExecOnlyBuildAsTheWorkerFailsModelDispatchesClosed(t *testing.T) {
	for _, learn := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "learn"}[learn], func(t *testing.T) {
			e := newModelEnv(t)
			dir := filepath.Join(t.TempDir(), "install")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			e.d.Worker.Path = filepath.Join(dir, workerbin.Name)
			redteam47wCopy(t, agoratest.ExecWorker(agoraBin), e.d.Worker.Path, 0o755, -1)
			e.d.Worker.Exec = workerbin.ExecBeside(e.d.Worker.Path)
			e.capability("files", "tools: [write_file]\n", nil)
			e.modelSubagent("writer", "openai", "files")
			srv := e.model(testAPIKey, openaitest.Func(func(openaitest.Request) openaitest.Reply { return openaitest.Reply{Content: "done"} }))
			r := e.run(dispatch.Request{Subagent: "writer", Envs: []string{"model"}, Learn: learn, Input: []byte(`{"prompt":"go"}`),
				Repo: gitRepo(t, map[string]string{"README.md": "# repo\n"})})
			if r.State != lifecycle.DispatchFailed || r.Reason != lifecycle.ReasonWorkerFailed || !strings.Contains(r.Detail, "not available in this build") {
				t.Fatalf("state %s (%s: %s), want failed worker-failed: runtime not available in this build", r.State, r.Reason, r.Detail)
			}
			if n := len(srv.Requests()); n != 0 {
				t.Errorf("the model was called %d times", n)
			}
			if r.WorkerBinary == nil || r.WorkerBinary.SHA256 != fileSHA(t, agoratest.ExecWorker(agoraBin)) {
				t.Errorf("worker_binary %+v, want the exec-only build's", r.WorkerBinary)
			}
		})
	}
}

// On a target with warm slots, the worker the sandbox ran (hashed inside it) is the record's
// and is agora-worker, cold and warm alike, with the exec-only worker installed: run.go's
// execOnly is false for a target with warm slots, so the slots' template (learnt from the
// cold dispatch's spec, the worker's bind with it) never carries the exec-only worker, and a
// slot's claim records what the slot started with. Were execOnly true here, the cold
// dispatch would run and record the exec-only worker.
func TestRedTeam47W_WarmTargetSandboxRunsTheRecordedWorker(t *testing.T) {
	if _, err := exec.LookPath("sha256sum"); err != nil {
		t.Skip("SKIP: no sha256sum")
	}
	e, w := warmEnv(t, 1)
	e.d.Worker.Exec = agoratest.ExecWorker(agoraBin)
	e.subagent("hasher", "sha256sum /agora/bin/agora-worker")
	full := fileSHA(t, agoratest.Worker(agoraBin))
	check := func(what string) {
		t.Helper()
		r := e.run(dispatch.Request{Subagent: "hasher"})
		if r.State != lifecycle.DispatchFinished {
			t.Fatalf("%s: state %s (%s: %s)", what, r.State, r.Reason, r.Detail)
		}
		ran := strings.Fields(e.stdout(r))
		if len(ran) == 0 || r.WorkerBinary == nil || ran[0] != r.WorkerBinary.SHA256 || ran[0] != full {
			t.Fatalf("%s: the sandbox ran %v, the record says %+v, agora-worker is %s", what, ran, r.WorkerBinary, full)
		}
	}
	check("cold")
	waitWarmReady(t, w, 1)
	check("warm")
	if c := warmCounts(w); c.Claimed != 1 {
		t.Fatalf("after the warm dispatch: %+v, want claimed 1", c)
	}
}
