package dispatch

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/blob"
	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/local"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/secret/redact"
	"github.com/agora-dev/agora/internal/store"
	"github.com/agora-dev/agora/internal/verdict"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// BenchmarkGate measures the verify gate's overhead beyond its command: the whole gate
// phase with the command `true` (tree built from a fresh checkout of a small repository plus
// a patch, protect check, hand-over, a new sandbox through the local provider, the verdict)
// against `true` in a bare namespaced bwrap and `true` through the local provider with the
// gate's own spec, in the same run. docs/BENCHMARKS.md records it.
//
//	go test -run '^$' -bench BenchmarkGate -benchmem -count 5 ./internal/dispatch
func BenchmarkGate(b *testing.B) {
	if err := local.Available(); err != nil {
		b.Skipf("SKIP: bubblewrap not available: %v", err)
	}
	if _, err := exec.LookPath("git"); err != nil {
		b.Skip("SKIP: git not installed")
	}
	ctx := context.Background()
	dir := b.TempDir()
	db, err := store.Open(ctx, filepath.Join(dir, "agora.db"), append(append([]store.Migration{}, audit.Migrations...), Migrations...))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	blobs, err := blob.Open(filepath.Join(dir, "blobs"))
	if err != nil {
		b.Fatal(err)
	}
	p, err := local.New(local.Options{})
	if err != nil {
		b.Fatal(err)
	}
	cfg := config.Default(dir)
	target, err := cfg.Target("local")
	if err != nil {
		b.Fatal(err)
	}
	d := &Dispatcher{Records: NewRecords(db, audit.New(nil), nil), Blobs: blobs, LocalProvider: p, Config: cfg, StateDir: filepath.Join(dir, "dispatches")}

	repo := benchRepo(b)
	commit := gitOut(b, repo, "rev-parse", "HEAD")
	patch := []byte("diff --git a/calc.go b/calc.go\n--- a/calc.go\n+++ b/calc.go\n@@ -1,3 +1,5 @@\n package calc\n \n func Add(a, b int) int { return a + b }\n+\n+func Sub(a, b int) int { return a - b }\n")
	dg, err := blobs.Put(patch)
	if err != nil {
		b.Fatal(err)
	}
	res := &Result{Patch: &Artifact{Digest: dg, Size: int64(len(patch))}}
	// A dispatch without a repository: its patch adds files to an empty tree.
	created := []byte("diff --git a/out.txt b/out.txt\nnew file mode 100644\n--- /dev/null\n+++ b/out.txt\n@@ -0,0 +1 @@\n+hello\n")
	cdg, err := blobs.Put(created)
	if err != nil {
		b.Fatal(err)
	}
	newFiles := &Result{Patch: &Artifact{Digest: cdg, Size: int64(len(created))}}
	r := &Record{ID: NewID(time.Now()), Subagent: "s", SubagentDigest: "sha256:00", Envs: []EnvRef{}, Target: "local", Sandbox: "bwrap",
		Network: "none", InputDigest: "sha256:00", Repo: repo, Revision: commit, Timeout: Duration(time.Minute), Actor: "bench",
		Verify: &verdict.Spec{Command: []string{"true"}, Timeout: time.Minute, Protect: []string{"**/*_test.go", ".github/**"}}}
	if err := d.Records.Accept(ctx, r); err != nil {
		b.Fatal(err)
	}
	if err := d.Records.Started(ctx, r.ID, "local:bench", selfSupervisor()); err != nil {
		b.Fatal(err)
	}
	limits := limitsFor(target, r.Sandbox, r.ID)
	if limits.owner != nil {
		lease, err := leaseUID(d.StateDir, target.SandboxUID, r.ID)
		if err != nil {
			b.Fatal(err)
		}
		defer lease.release()
		limits.owner = &compute.HostUser{UID: lease.uid, GID: lease.uid}
	}
	st, err := newStage(d.StateDir, r.ID, limits)
	if err != nil {
		b.Fatal(err)
	}
	defer st.removeWork()
	red := redact.New(nil)
	reset := func() {
		os.RemoveAll(st.gateDirOf())
		os.RemoveAll(filepath.Join(st.dir, gateGitDir))
	}
	enter := func(string) {}

	b.Run("gate-phase-true", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			reset()
			o := d.gate(ctx, r, st, p, target, Outcome{State: lifecycle.DispatchFinished, Result: res}, red, enter)
			if o.Verdict == nil || !o.Verdict.Passed {
				b.Fatalf("gate: %s %s %s %+v", o.State, o.Reason, o.Detail, o.Verdict)
			}
		}
	})
	b.Run("gate-phase-true-no-repo", func(b *testing.B) {
		norepo := *r
		norepo.Repo, norepo.Revision = "", ""
		b.ReportAllocs()
		for b.Loop() {
			reset()
			o := d.gate(ctx, &norepo, st, p, target, Outcome{State: lifecycle.DispatchFinished, Result: newFiles}, red, enter)
			if o.Verdict == nil || !o.Verdict.Passed {
				b.Fatalf("gate: %s %s %s %+v", o.State, o.Reason, o.Detail, o.Verdict)
			}
		}
	})
	b.Run("provider-true", func(b *testing.B) {
		// The local provider alone, with the gate's spec on an empty tree.
		ws := filepath.Join(st.dir, "bench-ws")
		os.MkdirAll(ws, 0o700)
		st.handOver(ws)
		b.ReportAllocs()
		for b.Loop() {
			h, err := p.Start(ctx, compute.Spec{ID: r.ID, Argv: []string{"true"}, Env: []string{"PATH=" + defaultVerifyPath, "HOME=/tmp"},
				Dir: wire.WorkspacePath, RunAs: st.owner, Limits: compute.Limits{Timeout: time.Minute},
				Binds: []compute.Bind{{Src: ws, Dst: wire.WorkspacePath, Writable: true}}})
			if err != nil {
				b.Fatal(err)
			}
			if exit, err := h.Wait(); err != nil || exit.Code != 0 {
				b.Fatalf("exit %+v: %v", exit, err)
			}
		}
	})
	b.Run("bare-bwrap-true", func(b *testing.B) {
		args := []string{"--unshare-all", "--die-with-parent", "--new-session", "--ro-bind", "/usr", "/usr"}
		for _, l := range []string{"/bin", "/lib", "/lib64", "/sbin"} {
			if t, err := os.Readlink(l); err == nil {
				args = append(args, "--symlink", t, l)
			}
		}
		args = append(args, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "true")
		b.ReportAllocs()
		for b.Loop() {
			if out, err := exec.Command("bwrap", args...).CombinedOutput(); err != nil {
				b.Fatalf("bwrap: %v: %s", err, out)
			}
		}
	})
}

func benchRepo(b *testing.B) string {
	b.Helper()
	dir := b.TempDir()
	files := map[string]string{"go.mod": "module example.com/calc\n\ngo 1.22\n", "calc.go": "package calc\n\nfunc Add(a, b int) int { return a + b }\n",
		"calc_test.go": "package calc\n", ".github/workflows/ci.yml": "on: push\n"}
	for i := range 50 {
		files[filepath.Join("pkg", "f"+string(rune('a'+i%26))+string(rune('a'+i/26))+".go")] = "package pkg\n"
	}
	for p, s := range files {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, p), []byte(s), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	gitOut(b, dir, "init", "-q", "-b", "main")
	gitOut(b, dir, "add", "-A")
	gitOut(b, dir, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "base")
	return dir
}

func gitOut(b *testing.B, dir string, args ...string) string {
	b.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).Output()
	if err != nil {
		b.Fatalf("git %v: %v", args, err)
	}
	return string(trimNL(out))
}

func trimNL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}
