package provision_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/budget"
	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/catalog/provision"
)

// TestWriter_PrepareSubagent_Budget: a subagent's budget goes into its document (and so its
// digest) and its metadata; a subagent without one keeps the digest it always had; a negative
// budget is refused.
func TestWriter_PrepareSubagent_Budget(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	spec := provision.SubagentSpec{Runtime: "openai", Model: "m", SystemPrompt: "p"}
	plain, err := f.w.PrepareSubagent(ctx, "s", spec, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if plain.Meta.Budget != nil || strings.Contains(string(plain.Content), "budget") {
		t.Fatalf("a subagent without a budget has one: %s", plain.Content)
	}
	spec.Budget = budget.Budget{USD: 0.5, ModelCalls: 20}
	p, err := f.w.PrepareSubagent(ctx, "s", spec, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := catalog.ParseSubagentDoc(p.Content)
	if err != nil || doc.Budget != spec.Budget || p.Meta.Budget == nil || *p.Meta.Budget != spec.Budget || p.Digest == plain.Digest {
		t.Fatalf("budget %+v (meta %+v, %v); digests %s %s", doc.Budget, p.Meta.Budget, err, p.Digest, plain.Digest)
	}
	spec.Budget = budget.Budget{Tokens: -1}
	if _, err := f.w.PrepareSubagent(ctx, "s", spec, nil, nil); err == nil || !strings.Contains(err.Error(), "budget tokens -1") {
		t.Fatalf("negative budget: %v", err)
	}
}
