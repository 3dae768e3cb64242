package dispatch_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/runtime/openairt/openaitest"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// An exec dispatch on a local target binds the exec-only worker when it is installed beside
// agora-worker: the record names its pinned copy and digest, and the sandbox sees it where it
// sees the worker.
func TestDispatch_ExecDispatchBindsTheExecOnlyWorker(t *testing.T) {
	e := newEnv(t)
	e.d.Worker.Exec = agoratest.ExecWorker(agoraBin)
	e.subagent("lister", `ls /agora/bin`)
	r := e.run(dispatch.Request{Subagent: "lister"})
	if r.State != lifecycle.DispatchFinished {
		t.Fatalf("state %s (%s: %s)", r.State, r.Reason, r.Detail)
	}
	if out := e.stdout(r); strings.TrimSpace(out) != "agora-worker" {
		t.Errorf("the sandbox's /agora/bin holds %q, want agora-worker alone", out)
	}
	want := fileSHA(t, e.d.Worker.Exec)
	if wb := r.WorkerBinary; wb == nil || wb.SHA256 != want || wb.Path != wire.BinPath || fileSHA(t, wb.HostPath) != want {
		t.Fatalf("worker_binary %+v: want the exec-only worker's sha256 %s, bound at %s", wb, want, wire.BinPath)
	}
	if want == fileSHA(t, agoratest.Worker(agoraBin)) {
		t.Fatal("the exec-only worker is agora-worker's bytes: the test tells nothing")
	}
}

// Without the exec-only worker beside it, every dispatch binds agora-worker, as before.
func TestDispatch_NoExecOnlyWorkerBindsTheWorker(t *testing.T) {
	e := newEnv(t)
	e.d.Worker.Exec = filepath.Join(t.TempDir(), "agora-worker-exec")
	e.subagent("noop", "true")
	r := e.run(dispatch.Request{Subagent: "noop"})
	if r.State != lifecycle.DispatchFinished {
		t.Fatalf("state %s (%s: %s)", r.State, r.Reason, r.Detail)
	}
	if r.WorkerBinary == nil || r.WorkerBinary.SHA256 != fileSHA(t, agoratest.Worker(agoraBin)) {
		t.Errorf("worker_binary %+v, want agora-worker's", r.WorkerBinary)
	}
}

// An exec-only worker that is there but fails the worker's checks fails the dispatch closed,
// as the worker would: it is never passed over for the other.
func TestDispatch_UnsoundExecOnlyWorkerFailsClosed(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	bad := filepath.Join(dir, "agora-worker-exec")
	b, err := os.ReadFile(agoratest.ExecWorker(agoraBin))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(bad, 0o777); err != nil { // anyone could rewrite what the sandbox runs
		t.Fatal(err)
	}
	e.d.Worker.Exec = bad
	marker := filepath.Join(t.TempDir(), "ran")
	e.subagent("toucher", "touch "+marker)
	r := e.run(dispatch.Request{Subagent: "toucher"})
	if r.State != lifecycle.DispatchFailed || r.Reason != lifecycle.ReasonProviderFailed || !strings.Contains(r.Detail, "writable by its group or others") || !strings.Contains(r.Detail, bad) {
		t.Fatalf("state %s (%s: %s), want failed provider-failed naming the group-writable %s", r.State, r.Reason, r.Detail, bad)
	}
	if _, err := os.Stat(marker); err == nil || r.StartedAt != nil {
		t.Errorf("the dispatch ran (started %v)", r.StartedAt)
	}
}

// A model runtime's dispatch binds agora-worker though the exec-only worker is there: only
// the full worker has the runtimes and the gateway's client.
func TestDispatch_ModelDispatchBindsTheWorker(t *testing.T) {
	e := newModelEnv(t)
	e.d.Worker.Exec = agoratest.ExecWorker(agoraBin)
	e.capability("files", "tools: [write_file]\n", nil)
	e.modelSubagent("writer", "openai", "files")
	e.model(testAPIKey, openaitest.Func(func(openaitest.Request) openaitest.Reply { return openaitest.Reply{Content: "done"} }))
	r := e.run(dispatch.Request{Subagent: "writer", Envs: []string{"model"}, Repo: gitRepo(t, map[string]string{"README.md": "# repo\n"})})
	wantFinished(t, r)
	if r.WorkerBinary == nil || r.WorkerBinary.SHA256 != fileSHA(t, agoratest.Worker(agoraBin)) {
		t.Errorf("worker_binary %+v, want agora-worker's", r.WorkerBinary)
	}
}

// A target with warm slots binds agora-worker for its exec dispatches too: its cold
// dispatches teach the slots their shape, the worker's bind with it, and a slot's claim
// records the worker the slot started with.
func TestWarm_ExecDispatchesBindTheWorker(t *testing.T) {
	e, w := warmEnv(t, 1)
	e.d.Worker.Exec = agoratest.ExecWorker(agoraBin)
	e.subagent("noop", "true")
	full := fileSHA(t, agoratest.Worker(agoraBin))
	cold := e.run(dispatch.Request{Subagent: "noop"})
	if cold.State != lifecycle.DispatchFinished || cold.WorkerBinary == nil || cold.WorkerBinary.SHA256 != full {
		t.Fatalf("cold: %s %s %s, worker_binary %+v, want agora-worker's", cold.State, cold.Reason, cold.Detail, cold.WorkerBinary)
	}
	waitWarmReady(t, w, 1)
	hot := e.run(dispatch.Request{Subagent: "noop"})
	if hot.State != lifecycle.DispatchFinished || hot.WorkerBinary == nil || hot.WorkerBinary.SHA256 != full {
		t.Fatalf("warm: %s %s %s, worker_binary %+v, want agora-worker's", hot.State, hot.Reason, hot.Detail, hot.WorkerBinary)
	}
	if c := warmCounts(w); c.Claimed != 1 || c.Cold != 0 {
		t.Fatalf("after the warm dispatch: %+v, want claimed 1 cold 0", c)
	}
}
