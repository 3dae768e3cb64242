package dispatch_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// TestRedTeam28W_SandboxCannotTouchTheWorker: a
// sandboxed agent attacks the worker every later hook event and dispatch runs: it writes,
// chmods, moves and removes /agora/bin/agora-worker, and looks for the pinned copy and its
// index at their host paths (AGORA_HOME/bin). All of it fails; afterwards the copy still
// hashes to the digest on the record, and the next dispatch binds the same bytes.
func TestRedTeam28W_SandboxCannotTouchTheWorker(t *testing.T) {
	e := newEnv(t)
	e.subagent("noop", "true")
	first := e.run(dispatch.Request{Subagent: "noop"})
	if first.State != lifecycle.DispatchFinished || first.WorkerBinary == nil {
		t.Fatalf("state %s (%s: %s), worker %+v", first.State, first.Reason, first.Detail, first.WorkerBinary)
	}
	copyPath, pinDir := first.WorkerBinary.HostPath, filepath.Dir(first.WorkerBinary.HostPath)
	script := `for f in /agora/bin/agora-worker ` + copyPath + ` ` + pinDir + `/index.json; do
  [ -e "$f" ] && echo "SEES $f"
  (printf pwned > "$f") 2>/dev/null && echo "WROTE $f"
  (printf pwned >> "$f") 2>/dev/null && echo "APPENDED $f"
  (chmod 0777 "$f") 2>/dev/null && echo "CHMOD $f"
  [ -e "$f" ] && (mv "$f" "$f.x") 2>/dev/null && echo "MOVED $f"
  [ -e "$f" ] && (rm -f "$f") 2>/dev/null && [ ! -e "$f" ] && echo "REMOVED $f"
done
(touch /agora/bin/other) 2>/dev/null && echo "CREATED /agora/bin/other"
(ls ` + pinDir + `) >/dev/null 2>&1 && echo "LISTED ` + pinDir + `"
true`
	e.subagent("attacker", script)
	r := e.run(dispatch.Request{Subagent: "attacker"})
	if r.State != lifecycle.DispatchFinished {
		t.Fatalf("state %s (%s: %s)", r.State, r.Reason, r.Detail)
	}
	if out := strings.TrimSpace(e.stdout(r)); out != "SEES /agora/bin/agora-worker" {
		t.Errorf("the sandbox reached the worker:\n%s\nwant only: SEES /agora/bin/agora-worker", out)
	}
	if got := fileSHA(t, copyPath); got != first.WorkerBinary.SHA256 {
		t.Fatalf("the pinned copy now hashes %s, the record says %s", got, first.WorkerBinary.SHA256)
	}
	if r.WorkerBinary == nil || *r.WorkerBinary != *first.WorkerBinary {
		t.Errorf("the attacker's dispatch ran worker %+v, want %+v", r.WorkerBinary, first.WorkerBinary)
	}
	next := e.run(dispatch.Request{Subagent: "noop"})
	if next.WorkerBinary == nil || *next.WorkerBinary != *first.WorkerBinary || fileSHA(t, next.WorkerBinary.HostPath) != first.WorkerBinary.SHA256 {
		t.Errorf("the next dispatch binds %+v, want %+v with the same bytes", next.WorkerBinary, first.WorkerBinary)
	}
}

// TestRedTeam28W_WorkerDigestInTheAudit (target 1, "does the audit show it"): the worker's
// digest reaches the audit log: the dispatch's provenance statement names the copy's sha256,
// which is the sha256 of the bytes bound, and the terminal entry's manifest digest is that
// statement's, so an exported bundle that rewrote the worker's digest fails verify. A record
// whose worker_binary is changed after the fact no longer matches the logged manifest.
func TestRedTeam28W_WorkerDigestInTheAudit(t *testing.T) {
	e := newEnv(t)
	e.subagent("noop", "true")
	r := e.run(dispatch.Request{Subagent: "noop"})
	if r.State != lifecycle.DispatchFinished || r.WorkerBinary == nil {
		t.Fatalf("state %s (%s: %s), worker %+v", r.State, r.Reason, r.Detail, r.WorkerBinary)
	}
	manifest, err := e.d.Records.EndedProvenance(t.Context(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	var stmt struct {
		Worker *struct {
			Path, HostPath, SHA256 string
		} `json:"worker_binary"`
	}
	if err := json.Unmarshal(manifest, &stmt); err != nil {
		t.Fatal(err)
	}
	if stmt.Worker == nil || stmt.Worker.SHA256 != fileSHA(t, r.WorkerBinary.HostPath) {
		t.Fatalf("the provenance statement's worker %+v is not the bound copy's sha256 %s", stmt.Worker, fileSHA(t, r.WorkerBinary.HostPath))
	}
	ended := e.audited(r, "dispatch.finished")
	if len(ended) != 1 {
		t.Fatalf("%d dispatch.finished entries", len(ended))
	}
	if got := ended[0].Details["manifest"]; got != dispatch.ProvenanceDigest(manifest) {
		t.Fatalf("the terminal entry's manifest %v is not the statement's digest %s", got, dispatch.ProvenanceDigest(manifest))
	}
	forged := *r
	wb := *r.WorkerBinary
	wb.SHA256 = strings.Repeat("0", 64)
	forged.WorkerBinary = &wb
	m2, err := dispatch.Provenance(&forged)
	if err != nil {
		t.Fatal(err)
	}
	if dispatch.ProvenanceDigest(m2) == ended[0].Details["manifest"] {
		t.Fatal("a record with another worker digest has the same manifest digest: the log does not bind the worker")
	}
}
