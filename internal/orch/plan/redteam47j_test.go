package plan_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/agora-dev/agora/internal/orch/plan"
	"github.com/agora-dev/agora/internal/strictyaml"
)

// TestRedTeam47J_CheckAfterSourceReused: a JSON plan's positions are computed when first
// asked, from the bytes it was parsed from; a caller that parses from a buffer it then reuses
// (a read buffer, a pooled one) and later calls Check must still get the plan's own lines.
func TestRedTeam47J_CheckAfterSourceReused(t *testing.T) {
	src := []byte("{\"version\": 1, \"name\": \"p\",\n \"tasks\": [{\"id\": \"a\", \"subagent\": \"fixer\"},\n\n\n  {\"id\": \"b\", \"subagent\": \"x\"}]}\n")
	buf := bytes.Clone(src)
	p, err := plan.Parse("p.json", buf)
	if err != nil {
		t.Fatal(err)
	}
	// The buffer now holds the next plan read into it, on fewer lines.
	copy(buf, bytes.ReplaceAll(src, []byte("\n"), []byte(" ")))
	err = p.Check(t.Context(), &fakeRefs{subagents: []string{"fixer"}})
	var es strictyaml.Errors
	if !errors.As(err, &es) || len(es) != 1 {
		t.Fatalf("Check = %v, want one problem", err)
	}
	if got := es[0].Error(); got != `p.json:5: tasks[1].subagent: subagent "x" not found; known: fixer` {
		t.Errorf("Check after the source buffer was reused: %s", got)
	}
}
