package mcpserver_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestResume_TwoProcessesOneChild, from the host's side: two `agora dispatch
// resume` processes answering one question at once, round after round, start exactly one
// child; the winner exits 0, the loser exits 2 naming the first answer's child; the parent is
// answered naming it (describe as text and -o json, and over MCP); the lists of what waits for
// an answer (dispatch list --state needs_input) drop the parent; the audit log holds one
// dispatch.answered naming the child and one dispatch.resume.refused, never a second answer;
// a later answer over MCP is refused the same way and audited as refused.
func TestResume_TwoProcessesOneChild(t *testing.T) {
	requireSandbox(t)
	home := newHome(t)
	agora(t, home, nil, "subagent", "register", "chooser", "--capability", "shell", "--command",
		`sh -c 'case "$AGORA_INPUT_JSON" in *agora_resume*) echo answered;; *) printf %s "{\"question\":\"Which color?\"}" > "$AGORA_OUT/needs_input.json";; esac'`)
	cs := stdioSession(t, home, "--ceiling", "dispatch")
	waiting := func() []string {
		var rs []dispatchRecord
		if err := json.Unmarshal(agora(t, home, nil, "dispatch", "list", "--state", "needs_input", "-o", "json", "--limit", "1000"), &rs); err != nil {
			t.Fatal(err)
		}
		ids := []string{}
		for _, r := range rs {
			ids = append(ids, r.ID)
		}
		return ids
	}
	for round := range 4 {
		out, stderr, code := agoraExit(t, home, "dispatch", "run", "--subagent", "chooser", "-o", "json")
		var parent dispatchRecord
		if err := json.Unmarshal([]byte(out), &parent); err != nil || parent.State != "needs_input" {
			t.Fatalf("round %d: asker: exit %d %v\n%s\n%s", round, code, err, out, stderr)
		}
		if !slices.Contains(waiting(), parent.ID) {
			t.Fatalf("round %d: dispatch list --state needs_input lacks the waiting %s", round, parent.ID)
		}
		type result struct {
			out, stderr string
			code        int
		}
		results := make([]result, 2)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range 2 {
			wg.Go(func() {
				<-start
				o, e, c := agoraExit(t, home, "dispatch", "resume", parent.ID, "--answer", fmt.Sprintf("answer %d", i), "--detach", "-o", "json")
				results[i] = result{o, e, c}
			})
		}
		close(start)
		wg.Wait()

		kids := waitEnded(t, home, childrenOf(t, home, parent.ID))
		if len(kids) != 1 {
			t.Fatalf("round %d: %d children of %s, want exactly 1: %+v (answers: %+v)", round, len(kids), parent.ID, kids, results)
		}
		child := kids[0]
		won := 0
		for i, r := range results {
			switch {
			case r.code == 0:
				won++
				var rec dispatchRecord
				if err := json.Unmarshal([]byte(r.out), &rec); err != nil || rec.ID != child.ID {
					t.Errorf("round %d: answer %d won but printed %q, want child %s", round, i, r.out, child.ID)
				}
			case r.code != 2 || !strings.Contains(r.stderr, "was already answered by") || !strings.Contains(r.stderr, "child "+child.ID):
				t.Errorf("round %d: answer %d: exit %d %q, want exit 2 naming the first answer's child %s", round, i, r.code, r.stderr, child.ID)
			}
		}
		if won != 1 {
			t.Errorf("round %d: %d answers won, want 1: %+v", round, won, results)
		}
		p := hostRecord(t, home, parent.ID)
		if p.State != "answered" || p.ChildID != child.ID || p.AnsweredBy == "" {
			t.Errorf("round %d: parent = %+v, want answered naming child %s", round, p, child.ID)
		}
		shown := string(agora(t, home, nil, "dispatch", "describe", parent.ID))
		if !strings.Contains(shown, "state:     answered\n") || !strings.Contains(shown, ": child "+child.ID+"\n") {
			t.Errorf("round %d: describe as text does not name the child %s:\n%s", round, child.ID, shown)
		}
		var desc loopOut
		decode(t, call(t, cs, "agora_dispatch_describe", map[string]any{"id": parent.ID}), &desc)
		if desc.Dispatch.State != "answered" || desc.Dispatch.ChildID != child.ID {
			t.Errorf("round %d: describe over MCP = %+v, want answered naming %s", round, desc.Dispatch, child.ID)
		}
		if slices.Contains(waiting(), parent.ID) {
			t.Errorf("round %d: dispatch list --state needs_input still lists the answered %s", round, parent.ID)
		}
		es := dispatchAudit(t, home, parent.ID)
		answered := kinds(es, "dispatch.answered")
		if len(answered) != 1 || answered[0].Details["child"] != child.ID {
			t.Errorf("round %d: dispatch.answered entries %+v, want one naming child %s", round, answered, child.ID)
		}
		if n := len(kinds(es, "dispatch.resume.refused")); n != 1 {
			t.Errorf("round %d: %d dispatch.resume.refused entries, want 1", round, n)
		}

		// Later, over MCP: refused naming the child, audited as refused, no second child.
		res := call(t, cs, "agora_dispatch", map[string]any{"resume": map[string]any{"dispatch": parent.ID, "answer": "late"}, "wait_seconds": 0})
		if !res.IsError || !strings.Contains(text(res), "child "+child.ID) {
			t.Errorf("round %d: a late answer over MCP: %q, want a refusal naming child %s", round, text(res), child.ID)
		}
		es = dispatchAudit(t, home, parent.ID)
		if n := len(kinds(es, "dispatch.resume.refused")); n != 2 {
			t.Errorf("round %d: %d dispatch.resume.refused entries after the late answer, want 2", round, n)
		}
		if n := len(kinds(es, "dispatch.answered")); n != 1 {
			t.Errorf("round %d: %d dispatch.answered entries after the late answer, want 1", round, n)
		}
		if kids := childrenOf(t, home, parent.ID); len(kids) != 1 {
			t.Errorf("round %d: %d children after the late answer", round, len(kids))
		}
	}
}
