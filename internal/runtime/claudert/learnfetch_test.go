package claudert

import (
	"slices"
	"testing"

	"github.com/agora-dev/agora/internal/grant"
)

// TestLearnFetch: a learn dispatch's widened fence loads WebFetch and allows it
// to any host (the egress proxy judges hosts there), whatever the grant's egress; without
// LearnFetch a grant with no egress host loads no WebFetch, as before.
func TestLearnFetch(t *testing.T) {
	g := Grants{Set: grant.Set{Tools: []string{"read_file", "http_fetch"}}}
	if slices.Contains(Tools(g), ccWebFetch) || slices.Contains(AllowedTools(g), ccWebFetch) {
		t.Fatalf("no egress host, no LearnFetch: tools %v allowed %v", Tools(g), AllowedTools(g))
	}
	g.LearnFetch = true
	if !slices.Contains(Tools(g), ccWebFetch) || !slices.Contains(AllowedTools(g), ccWebFetch) || slices.Contains(DisallowedTools(g), ccWebFetch) {
		t.Errorf("LearnFetch: tools %v allowed %v disallowed %v, want WebFetch loaded and allowed", Tools(g), AllowedTools(g), DisallowedTools(g))
	}
}
