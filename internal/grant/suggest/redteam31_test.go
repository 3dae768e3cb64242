package suggest_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/grant/suggest"
)

// TestRedTeam31_LearnRefusedCallsProposeNothing (learn): in a learn dispatch a
// tool.call that is not "allowed" (denied, requested, error) of a tool the grant lacks
// proposes nothing: anything in the sandbox can post one to the gateway, and every call the
// grant refuses is a would_deny there, which says who reported it. A denied one is listed
// among the refusals; the same entries in a dispatch that is not a learn one still propose
// (their refusals are what suggest reads there), and a would_deny from the worker still does.
func TestRedTeam31_LearnRefusedCallsProposeNothing(t *testing.T) {
	ents := []map[string]any{
		{entry.KeyTool: "write_file", entry.KeyDecision: "denied"},
		{entry.KeyTool: "WebFetch", entry.KeyDecision: "requested", entry.KeyPhase: "pre", "call_id": "toolu_x"},
		{entry.KeyTool: "http_fetch", entry.KeyDecision: "error"},
		{entry.KeyTool: "read_file", entry.KeyDecision: "denied"}, // granted: changes nothing
		{entry.KeyTool: "run_command", entry.KeyDecision: "denied"},
	}
	run := func(learn bool) *suggest.Proposal {
		ev := suggest.NewEvidence()
		d := ev.Dispatch("d1", grant.Set{Tools: []string{"read_file"}}, nil)
		d.Learn = learn
		for _, e := range ents {
			d.Entry(entry.ToolCall, e)
		}
		d.Entry(entry.ToolWouldDeny, map[string]any{entry.KeyTool: "list_files", entry.KeyReason: "not granted", entry.KeyReporter: "worker"})
		p, err := suggest.Propose(ev, grant.Set{Tools: []string{"read_file"}}, suggest.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := run(true)
	if want := []string{"list_files", "read_file"}; !slices.Equal(p.Grant.Tools, want) {
		t.Errorf("learn: tools %q, want %q (the worker's would_deny and the grant's own)", p.Grant.Tools, want)
	}
	if !slices.ContainsFunc(p.Refused, func(r suggest.Refusal) bool {
		return strings.Contains(r.Item, "write_file") && strings.Contains(r.Reason, "learn dispatch without a would_deny")
	}) {
		t.Errorf("learn: the denied write_file is not among the refusals: %+v", p.Refused)
	}
	// A plain dispatch is no looser: its refusals are listed apart, never proposed (anything
	// in the sandbox can post a tool.call refusal to the gateway).
	p = run(false)
	if want := []string{"read_file"}; !slices.Equal(p.Grant.Tools, want) {
		t.Errorf("not learn: tools %q, want %q (no refusal proposes a tool)", p.Grant.Tools, want)
	}
	if !slices.ContainsFunc(p.Refused, func(r suggest.Refusal) bool {
		return strings.Contains(r.Item, "write_file") && strings.Contains(r.Reason, "the grant refused it")
	}) {
		t.Errorf("not learn: the denied write_file is not among the refusals: %+v", p.Refused)
	}
}
