package mcpserver_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
)

// TestRedTeam29_StdioNameIsFixedAtInitialize: the name a stdio
// client is recorded under is the one it gave in its initialize, read once, flattened, and
// never changed by the client later: a tools/call before initialize is refused and recorded
// as nothing; a name with a NUL, '@' and a second, differently cased "Name" key is recorded
// flattened (no '@' of its own, so never another user's); a second initialize, naming someone
// else, is refused and the calls after it stay under the first name. Raw JSON-RPC bytes
// against the real binary.
func TestRedTeam29_StdioNameIsFixedAtInitialize(t *testing.T) {
	out, err := exec.Command("id", "-un").Output()
	if err != nil {
		t.Skipf("SKIP: cannot tell the OS user: %v", err)
	}
	user := strings.TrimSpace(string(out))
	home := newHome(t)
	cmd := exec.Command(agoraBin, "mcp", "--ceiling", "read")
	cmd.Env = baseEnv(home)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { in.Close(); cmd.Wait() }()
	lines := bufio.NewScanner(stdout)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	ask := func(msg string, wantID int) map[string]any {
		t.Helper()
		if _, err := io.WriteString(in, msg+"\n"); err != nil {
			t.Fatal(err)
		}
		if wantID == 0 {
			return nil
		}
		for lines.Scan() {
			var m map[string]any
			if json.Unmarshal(lines.Bytes(), &m) == nil && m["id"] == float64(wantID) {
				return m
			}
		}
		t.Fatalf("no answer to id %d", wantID)
		return nil
	}
	const call = `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"agora_envs_list","arguments":{}}}`
	callN := func(id int) string { return strings.Replace(call, "%d", string(rune('0'+id)), 1) }
	if m := ask(callN(1), 1); m["error"] == nil {
		t.Errorf("a tools/call before initialize was answered: %v", m)
	}
	ask(`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"gamma\u0000@alice","Name":"human:root","version":"0"}}}`, 2)
	ask(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, 0)
	if m := ask(callN(3), 3); m["result"] == nil {
		t.Fatalf("a call after initialize: %v", m)
	}
	if m := ask(`{"jsonrpc":"2.0","id":4,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"mallory","version":"0"}}}`, 4); m["error"] == nil {
		t.Errorf("a second initialize was taken: %v", m)
	}
	if m := ask(callN(5), 5); m["result"] == nil {
		t.Fatalf("a call after the second initialize: %v", m)
	}
	var actors []string
	agoratest.Eventually(t, 10*time.Second, "the two calls' audit entries", func() error {
		actors = actors[:0]
		for _, e := range auditEntries(t, home) {
			actors = append(actors, e.Actor)
		}
		if len(actors) < 2 {
			return fmt.Errorf("entries of %q", actors)
		}
		return nil
	})
	want := "gamma--alice@" + user
	if len(actors) != 2 || actors[0] != want || actors[1] != want {
		t.Errorf("the calls were recorded as %q; want exactly two, both %q", actors, want)
	}
}
