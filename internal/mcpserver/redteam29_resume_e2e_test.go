package mcpserver_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestRedTeam29_ResumeFromThreeDoorsWithACancel: one question,
// answered at once through three doors (an SDK client over stdio, another over HTTP, each
// its own server process, and the CLI), while a fourth client cancels the dispatch that asks.
// Round after round: exactly one child; the one answer that won names it, the two others are
// refused naming it; the cancel neither stops nor marks the answered question (a question is
// not a running dispatch: it leaves it as it is); the parent is answered naming the child and
// leaves the waiting list; the audit log has one dispatch.answered, two refusals and no
// cancellation of the parent.
func TestRedTeam29_ResumeFromThreeDoorsWithACancel(t *testing.T) {
	requireSandbox(t)
	home := newHome(t)
	token := newToken(t)
	srv := httpServer(t, home, []string{"AGORA_HTTP_TOKEN=" + token}, "--ceiling", "dispatch")
	stdio := stdioSession(t, home, "--ceiling", "dispatch")
	web := httpSession(t, srv.url, token)
	canceller := httpSession(t, srv.url, token)
	waiting := func() []string {
		var rs []dispatchRecord
		if err := json.Unmarshal(agora(t, home, nil, "dispatch", "list", "--state", "needs_input", "-o", "json", "--limit", "1000"), &rs); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range rs {
			ids = append(ids, r.ID)
		}
		return ids
	}
	for round := range 3 {
		var parent loopOut
		decode(t, call(t, stdio, "agora_dispatch", map[string]any{"subagent": "asker", "wait_seconds": 120}), &parent)
		pid := parent.Dispatch.ID
		if parent.Dispatch.State != "needs_input" || !slices.Contains(waiting(), pid) {
			t.Fatalf("round %d: the asker is %q, listed waiting %v", round, parent.Dispatch.State, slices.Contains(waiting(), pid))
		}
		type answer struct {
			door, out string
			won       bool
		}
		answers := make([]answer, 3)
		var cancelText string
		var cancelErr bool
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i, door := range []struct {
			name string
			cs   *mcp.ClientSession
		}{{"stdio", stdio}, {"http", web}} {
			wg.Go(func() {
				<-start
				res, err := door.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "agora_dispatch",
					Arguments: map[string]any{"resume": map[string]any{"dispatch": pid, "answer": "from " + door.name}, "wait_seconds": 0}})
				if err != nil {
					answers[i] = answer{door.name, err.Error(), false}
					return
				}
				answers[i] = answer{door.name, text(res), !res.IsError}
			})
		}
		wg.Go(func() {
			<-start
			out, stderr, code := agoraExit(t, home, "dispatch", "resume", pid, "--answer", "from cli", "--detach", "-o", "json")
			answers[2] = answer{"cli", out + stderr, code == 0}
		})
		wg.Go(func() {
			<-start
			res, err := canceller.CallTool(context.Background(), &mcp.CallToolParams{Name: "agora_dispatch_cancel", Arguments: map[string]any{"id": pid}})
			if err != nil {
				cancelText, cancelErr = err.Error(), true
				return
			}
			cancelText, cancelErr = text(res), res.IsError
		})
		close(start)
		wg.Wait()

		kids := waitEnded(t, home, childrenOf(t, home, pid))
		if len(kids) != 1 {
			t.Fatalf("round %d: %d children of %s, want 1 (answers %+v)", round, len(kids), pid, answers)
		}
		child := kids[0].ID
		won := 0
		for _, a := range answers {
			switch {
			case a.won:
				won++
				if !strings.Contains(a.out, child) {
					t.Errorf("round %d: the %s answer won but does not name child %s: %.300s", round, a.door, child, a.out)
				}
			case !strings.Contains(a.out, "already answered") || !strings.Contains(a.out, "child "+child):
				t.Errorf("round %d: the %s answer was refused without naming the first answer's child %s: %.300s", round, a.door, child, a.out)
			}
		}
		if won != 1 {
			t.Errorf("round %d: %d answers won, want 1: %+v", round, won, answers)
		}
		var cancelled loopOut
		if err := json.Unmarshal([]byte(cancelText), &cancelled); cancelErr || err != nil ||
			(cancelled.Dispatch.State != "needs_input" && cancelled.Dispatch.State != "answered") {
			t.Errorf("round %d: cancelling the question answered %v %.300s; want the record as it is, not cancelled", round, cancelErr, cancelText)
		}
		p := hostRecord(t, home, pid)
		if p.State != "answered" || p.ChildID != child {
			t.Errorf("round %d: parent %+v, want answered naming %s", round, p, child)
		}
		if slices.Contains(waiting(), pid) {
			t.Errorf("round %d: the answered %s is still listed as waiting", round, pid)
		}
		es := dispatchAudit(t, home, pid)
		if n := len(kinds(es, "dispatch.answered")); n != 1 {
			t.Errorf("round %d: %d dispatch.answered entries, want 1", round, n)
		}
		if n := len(kinds(es, "dispatch.resume.refused")); n != 2 {
			t.Errorf("round %d: %d dispatch.resume.refused entries, want 2", round, n)
		}
		for _, e := range es {
			if strings.Contains(e.Kind, "cancel") {
				t.Errorf("round %d: the parent's audit has %s although nothing was cancelled", round, e.Kind)
			}
		}
	}
}
