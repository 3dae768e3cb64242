package mcpserver_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/api"
)

// TestWatch_NeedsInputAnswersAtOnce: agora_orchestrator_watch on a run that
// waits for a person (needs_input) returns at once, over stdio and over HTTP, with the run's
// state and a next that names the exact `agora orch answer RUN TASK` a person must run; status
// over MCP and `agora orch status` (text and -o json) say the same. Before the fix a watch of
// timeout_seconds waited all of it and said nothing about who can move the run.
func TestWatch_NeedsInputAnswersAtOnce(t *testing.T) {
	requireSandbox(t)
	home := newHome(t)
	agora(t, home, nil, "subagent", "register", "chooser", "--capability", "shell", "--command",
		`sh -c 'case "$AGORA_INPUT_JSON" in *agora_resume*) echo answered;; *) printf %s "{\"question\":\"Which color?\"}" > "$AGORA_OUT/needs_input.json";; esac'`)
	startServe(t, home)
	stdio := stdioSession(t, home, "--ceiling", "orchestrate")
	token := newToken(t)
	srv := httpServer(t, home, []string{"AGORA_HTTP_TOKENS_FILE=" + tokensFile(t, map[string][2]string{"lead": {token, "read"}})})
	httpCS := httpSession(t, srv.url, token)

	plan := map[string]any{"version": 1, "name": "asks", "tasks": []any{map[string]any{"id": "pick", "subagent": "chooser"}}}
	var sub api.SubmitResponse // = agora orch submit -o json
	decode(t, call(t, stdio, "agora_orchestrator_submit", map[string]any{"plan": plan}), &sub)
	id := sub.Run.ID
	var st struct {
		Run api.Run `json:"run"`
	}
	agoratest.Eventually(t, 60*time.Second, "run "+id+" to need input", func() error {
		decode(t, call(t, stdio, "agora_orchestrator_status", map[string]any{"run_id": id}), &st)
		if lifecycle.RunEnded(st.Run.State) {
			t.Fatalf("run %s is %s, want needs_input: %+v", id, st.Run.State, st.Run)
		}
		if st.Run.State != lifecycle.RunNeedsInput {
			return fmt.Errorf("it is %s", st.Run.State)
		}
		return nil
	})
	want := fmt.Sprintf("run %s waits for a person: task pick asks a question only a person can answer: "+
		"a person must run `agora orch answer %s pick --answer TEXT` on the host (no MCP tool answers a run's question); "+
		"until then nothing in it moves and watching it returns at once", id, id)
	if st.Run.Next != want {
		t.Errorf("status over MCP: next = %q\nwant %q", st.Run.Next, want)
	}

	const timeout = 60
	for name, cs := range map[string]*mcp.ClientSession{"stdio": stdio, "http": httpCS} {
		start := time.Now()
		var w struct {
			Run api.Run `json:"run"`
		}
		decode(t, call(t, cs, "agora_orchestrator_watch", map[string]any{"run_id": id, "timeout_seconds": timeout}), &w)
		// Not a timing target: only that the call did not sit out its timeout.
		if took := time.Since(start); took >= timeout/2*time.Second {
			t.Errorf("%s: watch of a run in needs_input took %s of its %ds timeout", name, took, timeout)
		}
		if w.Run.State != lifecycle.RunNeedsInput || w.Run.Next != want {
			t.Errorf("%s: watch = state %q next %q\nwant needs_input, next %q", name, w.Run.State, w.Run.Next, want)
		}
	}

	var cliJSON api.Run
	if err := json.Unmarshal(agora(t, home, nil, "orch", "status", id, "-o", "json"), &cliJSON); err != nil {
		t.Fatal(err)
	}
	if cliJSON.Next != want {
		t.Errorf("agora orch status -o json: next = %q\nwant %q", cliJSON.Next, want)
	}
	_, stderr, code := agoraExit(t, home, "orch", "status", id)
	if code != 0 || !strings.Contains(stderr, "next: "+want+"\n") {
		t.Errorf("agora orch status: exit %d, stderr %q; want the line next: %s", code, stderr, want)
	}

	// Answered, the run moves on and says nothing of a person any more.
	agora(t, home, nil, "orch", "answer", id, "pick", "--answer", "blue")
	// A watch returns at once while the run still waits for the answer to land, so it is
	// asked again until the run has ended.
	agoratest.Eventually(t, 60*time.Second, "run "+id+" to end after the answer", func() error {
		st.Run = api.Run{}
		decode(t, call(t, httpCS, "agora_orchestrator_watch", map[string]any{"run_id": id, "timeout_seconds": 10}), &st)
		if !lifecycle.RunEnded(st.Run.State) {
			return fmt.Errorf("it is %s: %+v", st.Run.State, st.Run)
		}
		return nil
	})
	if st.Run.State != lifecycle.RunSucceeded || st.Run.Next != "" {
		t.Errorf("after the answer: state %s, next %q; want succeeded and no next", st.Run.State, st.Run.Next)
	}
}
