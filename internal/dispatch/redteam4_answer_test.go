package dispatch_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// TestRedTeam4_AnsweredOnceUnderContentionAndOldRows: eight
// MCP answers to one question at once start exactly one child; the other seven are refused as
// answers (an AnsweredError naming the first, each audited dispatch.resume.refused), never a
// database error and never a second child. Then the parent is put back as a row written before
// answers were recorded (needs_input, no child_id, its child still naming it): a later answer
// is refused naming that child.
func TestRedTeam4_AnsweredOnceUnderContentionAndOldRows(t *testing.T) {
	e := newEnv(t)
	e.subagent("asker", `if printf %s "$AGORA_INPUT_JSON" | grep -q agora_resume; then echo answered; else printf '{"question":"which?"}' > "$AGORA_OUT/`+wire.NeedsInputFile+`"; fi`)
	parent := e.run(dispatch.Request{Subagent: "asker"})
	if parent.State != lifecycle.DispatchNeedsInput {
		t.Fatalf("parent: %s %s %s", parent.State, parent.Reason, parent.Detail)
	}
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	kids := make([]*dispatch.Record, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			by := dispatch.Answerer{Actor: "mcp:client" + string(rune('a'+i)), Via: dispatch.ViaMCP, Role: "dispatch"}
			req, err := e.d.ResumeRequest(t.Context(), parent, "answer", by)
			if err == nil {
				req.Actor = by.Actor
				kids[i], err = e.d.Accept(t.Context(), req)
			}
			errs[i] = err
		})
	}
	close(start)
	wg.Wait()
	var child *dispatch.Record
	for i, err := range errs {
		var ae *dispatch.AnsweredError
		switch {
		case err == nil && child == nil:
			child = kids[i]
		case err == nil:
			t.Errorf("a second answer started child %s (the first: %s)", kids[i].ID, child.ID)
		case !errors.As(err, &ae) && !strings.Contains(err.Error(), "was already answered"):
			t.Errorf("answer %d failed otherwise than as a refused answer: %v", i, err)
		}
	}
	if child == nil {
		t.Fatalf("no answer won: %v", errs)
	}
	for _, err := range errs {
		if err != nil && !strings.Contains(err.Error(), "child "+child.ID) {
			t.Errorf("refusal %q does not name the first answer's child %s", err, child.ID)
		}
	}
	var refused int
	if err := e.home.DB.SQL().QueryRow(`SELECT count(*) FROM audit_entries WHERE kind = ? AND subject = ?`,
		entry.DispatchResumeRefused, "dispatch/"+parent.ID).Scan(&refused); err != nil {
		t.Fatal(err)
	}
	if refused != n-1 {
		t.Errorf("%d dispatch.resume.refused entries, want %d", refused, n-1)
	}
	if _, err := e.d.Supervise(t.Context(), child.ID, nil); err != nil {
		t.Fatal(err)
	}

	// A row from before answers were recorded: waiting, no child named, its child on record.
	if _, err := e.home.DB.SQL().Exec(`UPDATE dispatches SET state = ?, child_id = '', answered_by = '', answered_at = '' WHERE id = ?`,
		lifecycle.DispatchNeedsInput, parent.ID); err != nil {
		t.Fatal(err)
	}
	old, err := e.d.Records.Get(t.Context(), parent.ID)
	if err != nil {
		t.Fatal(err)
	}
	req, err := e.d.ResumeRequest(t.Context(), old, "again", dispatch.Answerer{Actor: "mcp:late", Via: dispatch.ViaMCP, Role: "dispatch"})
	if err == nil {
		_, err = e.d.Accept(t.Context(), req)
	}
	if err == nil || !strings.Contains(err.Error(), "child "+child.ID) {
		t.Errorf("an answer to an old row already answered: %v, want a refusal naming child %s", err, child.ID)
	}
}
