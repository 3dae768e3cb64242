package web

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// TestServer_HeldCallShowsWhatIsApproved, on the dispatch page: a held
// call shows the fields the CLI shows (rule, size of the arguments, digest, the preview with
// its cut marker) and, while it is pending, the command that prints its whole arguments.
func TestServer_HeldCallShowsWhatIsApproved(t *testing.T) {
	now := time.Now()
	preview := `{"path":".githooks/post-checkout","content":"#!/bin/sh\n# Keep the docs index fresh"[… 2,391 more bytes not shown]} [… 2,431 bytes of arguments in all; agora dispatch approval show d9 call_hook prints them]`
	recs := map[string]*dispatch.Record{"d9": {ID: "d9", State: lifecycle.DispatchStarted, Subagent: "writer", CreatedAt: now, StartedAt: &now,
		Phase: dispatch.PhaseAwaitingApproval, Approvals: []dispatch.Approval{{
			Seq: 1, CallID: "call_hook", Tool: "write_file", Rule: "write_file", State: dispatch.ApprovalPending,
			ArgsDigest: "sha256:" + strings.Repeat("a", 64), Preview: preview, ArgsBytes: 2431, ExpiresAt: now.Add(time.Minute),
		}}}}
	e := startWith(t, Sources{Orch: newFakeOrch(), Dispatches: fakeDispatches{recs}})
	c, _ := login(t, e, readToken)
	resp, err := c.Get(e.base + "/dispatches/d9")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(b)
	for _, want := range []string{
		`&#34;path&#34;:&#34;.githooks/post-checkout&#34;`, "[… 2,391 more bytes not shown]",
		"2431 bytes of arguments", "rule write_file", "agora dispatch approval show d9 call_hook",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the dispatch page lacks %q:\n%.3000s", want, page[strings.Index(page, "Held calls"):])
		}
	}
}
