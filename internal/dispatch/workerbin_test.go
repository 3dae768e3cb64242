package dispatch_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// The sandbox runs the slim worker, pinned: the record names the copy that was bound and its
// digest, which is the installed agora-worker's, and the sandbox's /agora/bin holds
// agora-worker, not agora.
func TestDispatch_WorkerBinaryOnTheRecord(t *testing.T) {
	e := newEnv(t)
	e.subagent("lister", `ls /agora/bin`)
	r := e.run(dispatch.Request{Subagent: "lister"})
	if r.State != lifecycle.DispatchFinished {
		t.Fatalf("state %s (%s: %s)", r.State, r.Reason, r.Detail)
	}
	if out := e.stdout(r); strings.TrimSpace(out) != "agora-worker" {
		t.Errorf("the sandbox's /agora/bin holds %q, want agora-worker alone", out)
	}
	wb := r.WorkerBinary
	if wb == nil {
		t.Fatal("the record names no worker binary")
	}
	want := fileSHA(t, agoratest.Worker(agoraBin))
	if wb.SHA256 != want || wb.Path != wire.BinPath || fileSHA(t, wb.HostPath) != want {
		t.Errorf("worker_binary %+v: want sha256 %s of the installed worker, bound from a copy with those bytes at %s", wb, want, wire.BinPath)
	}
	if filepath.Dir(wb.HostPath) == filepath.Dir(agoratest.Worker(agoraBin)) {
		t.Errorf("bound the installed file %s itself, not the pinned copy", wb.HostPath)
	}
	again, err := e.d.Records.Get(t.Context(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if again.WorkerBinary == nil || *again.WorkerBinary != *wb {
		t.Errorf("stored worker_binary %+v, returned %+v", again.WorkerBinary, wb)
	}
}

// `go install ./cmd/agora` alone leaves no worker beside agora: the dispatch fails closed,
// saying the command that fixes it, and nothing ran.
func TestDispatch_NoWorkerFailsClosed(t *testing.T) {
	e := newEnv(t)
	e.d.Worker.Path = filepath.Join(t.TempDir(), "agora-worker")
	marker := filepath.Join(t.TempDir(), "ran")
	e.subagent("toucher", "touch "+marker)
	r := e.run(dispatch.Request{Subagent: "toucher"})
	if r.State != lifecycle.DispatchFailed || r.Reason != lifecycle.ReasonProviderFailed {
		t.Fatalf("state %s (%s: %s), want failed provider-failed", r.State, r.Reason, r.Detail)
	}
	for _, w := range []string{"agora-worker", "no such file", "make install", "go install ./cmd/agora ./cmd/agora-full ./cmd/agora-worker"} {
		if !strings.Contains(r.Detail, w) {
			t.Errorf("detail %q does not say %q", r.Detail, w)
		}
	}
	if r.WorkerBinary != nil || r.StartedAt != nil {
		t.Errorf("a dispatch with no worker recorded %+v, started %v", r.WorkerBinary, r.StartedAt)
	}
}

// The full agora binary is not a worker: bound in its place (agora.yaml's worker.binary
// pointing at agora itself), it is refused before anything starts.
func TestDispatch_AgoraItselfIsNotTheWorker(t *testing.T) {
	e := newEnv(t)
	e.d.Worker.Path, e.d.Worker.Configured = agoraBin, true
	e.subagent("noop", "true")
	r := e.run(dispatch.Request{Subagent: "noop"})
	if r.State != lifecycle.DispatchFailed || !strings.Contains(r.Detail, "not github.com/agora-dev/agora/cmd/agora-worker") || !strings.Contains(r.Detail, "make install") {
		t.Fatalf("state %s (%s: %s), want refused: agora is not the worker", r.State, r.Reason, r.Detail)
	}
}
