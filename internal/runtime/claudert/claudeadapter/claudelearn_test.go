package claudeadapter

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/runtime/agentrun"
	"github.com/agora-dev/agora/internal/secret/redact"
	"github.com/agora-dev/agora/internal/toolreg/builtin"
)

// TestClaudeWrites_OnlyPrintedWritesOutside (file.would_deny, claude; attacks on the
// relay's /learn/file, which anything in the sandbox can reach): the worker learns only a
// Write claude printed whose path leaves the workspace, taken from the printed input, once
// per call: a call id never printed, another tool, a Write inside the workspace or into
// .git, and a second request for the same call are refused, unrecorded and unwritten. The
// learned write is recorded (path, op, tool, call id, via hook) before it is made, in the
// scratch directory, and the path asked for stays untouched.
func TestClaudeWrites_OnlyPrintedWritesOutside(t *testing.T) {
	defer func(w time.Duration) { vouchWait = w }(vouchWait)
	vouchWait = 50 * time.Millisecond
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{ws, outside, filepath.Join(ws, ".git")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var bodies []map[string]any
	var vias []string
	sockDir, err := os.MkdirTemp("", "cw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	sock := filepath.Join(sockDir, "gw.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m map[string]any
		json.Unmarshal(b, &m)
		mu.Lock()
		bodies = append(bodies, m)
		vias = append(vias, r.URL.Path+" "+r.Header.Get(agentrun.WorkerViaHeader))
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	scratch, err := builtin.NewScratch(base, ws)
	if err != nil {
		t.Fatal(err)
	}
	defer scratch.Close()
	red := redact.New(nil)
	p := newPrintedCalls(red)
	print := func(id, tool string, in map[string]string) {
		b, _ := json.Marshal(in)
		p.saw(id, tool, agentrun.ArgsHash(red, b), b)
	}
	target := filepath.Join(outside, "app.conf")
	print("toolu_out", "Write", map[string]string{"file_path": target, "content": "LEARNED"})
	print("toolu_in", "Write", map[string]string{"file_path": filepath.Join(ws, "in.txt"), "content": "x"})
	print("toolu_git", "Write", map[string]string{"file_path": filepath.Join(ws, ".git", "config"), "content": "x"})
	print("toolu_bash", "Bash", map[string]string{"command": "echo hi"})
	print("toolu_edit", "Edit", map[string]string{"file_path": target, "old_string": "a", "new_string": "b"})
	gw := agentrun.NewGatewayClient(func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}).WithKey(strings.Repeat("ab", 32))
	c := &claudeWrites{scratch: scratch, gw: gw, printed: p, dir: ws, done: map[string]bool{}}
	for _, id := range []string{"toolu_never", "toolu_bash", "toolu_in", "toolu_git", "toolu_edit"} {
		if where, err := c.learn(t.Context(), id); err == nil {
			t.Errorf("%s learned, to %s", id, where)
		}
	}
	mu.Lock()
	n := len(bodies)
	mu.Unlock()
	if n != 0 {
		t.Fatalf("refused requests were recorded: %v", bodies)
	}
	where, err := c.learn(t.Context(), "toolu_out")
	if err != nil || !strings.HasPrefix(where, scratch.Dir()) {
		t.Fatalf("the printed Write outside: %q %v", where, err)
	}
	if b, err := os.ReadFile(where); err != nil || string(b) != "LEARNED" {
		t.Errorf("the scratch copy: %q %v", b, err)
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Errorf("the path asked for was written: %v", err)
	}
	if _, err := c.learn(t.Context(), "toolu_out"); err == nil {
		t.Error("a second request for one call was learned again")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 1 || bodies[0]["path"] != target || bodies[0]["op"] != "write" || bodies[0]["tool"] != "Write" ||
		bodies[0]["call_id"] != "toolu_out" || vias[0] != "/audit/file hook" {
		t.Errorf("recorded %v via %v", bodies, vias)
	}
}
