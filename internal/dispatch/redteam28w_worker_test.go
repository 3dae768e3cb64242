package dispatch_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/dispatch"
)

// TestRedTeam28W_SandboxCannotTouchTheWorker (red team #28, slim worker, target 1): a
// sandboxed agent attacks the worker every later hook event and dispatch runs: it writes,
// chmods, moves and removes /agora/bin/agora-worker, and looks for the pinned copy and its
// index at their host paths (AGORA_HOME/bin). All of it fails; afterwards the copy still
// hashes to the digest on the record, and the next dispatch binds the same bytes.
func TestRedTeam28W_SandboxCannotTouchTheWorker(t *testing.T) {
	e := newEnv(t)
	e.subagent("noop", "true")
	first := e.run(dispatch.Request{Subagent: "noop"})
	if first.State != dispatch.StateFinished || first.WorkerBinary == nil {
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
	if r.State != dispatch.StateFinished {
		t.Fatalf("state %s (%s: %s)", r.State, r.Reason, r.Detail)
	}
	if out := strings.TrimSpace(e.stdout(r)); out != "SEES /agora/bin/agora-worker" {
		t.Errorf("the sandbox reached the worker:\n%s\nwant only: SEES /agora/bin/agora-worker", out)
	}
	if got := sha256File(t, copyPath); got != first.WorkerBinary.SHA256 {
		t.Fatalf("the pinned copy now hashes %s, the record says %s", got, first.WorkerBinary.SHA256)
	}
	if r.WorkerBinary == nil || *r.WorkerBinary != *first.WorkerBinary {
		t.Errorf("the attacker's dispatch ran worker %+v, want %+v", r.WorkerBinary, first.WorkerBinary)
	}
	next := e.run(dispatch.Request{Subagent: "noop"})
	if next.WorkerBinary == nil || *next.WorkerBinary != *first.WorkerBinary || sha256File(t, next.WorkerBinary.HostPath) != first.WorkerBinary.SHA256 {
		t.Errorf("the next dispatch binds %+v, want %+v with the same bytes", next.WorkerBinary, first.WorkerBinary)
	}
}
