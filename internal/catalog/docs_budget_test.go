package catalog

import (
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/budget"
)

// TestSubagentDoc_Budget: a subagent without a budget keeps its version-1 bytes (and so its
// digest); one with a budget is version 2, round-trips, and a version-1 document carrying a
// budget is refused (an old reader would have dropped the limit).
func TestSubagentDoc_Budget(t *testing.T) {
	plain := SubagentDoc{Runtime: "openai", Model: "gpt-4o-mini", SystemPrompt: "p"}
	b, err := plain.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"capabilities":[],"command":[],"description":"","model":"gpt-4o-mini","runtime":"openai","system_prompt":"p","version":1}`
	if string(b) != want {
		t.Fatalf("bytes without a budget changed:\n got %s\nwant %s", b, want)
	}
	withBudget := plain
	withBudget.Budget = budget.Budget{Tokens: 5000, USD: 0.25}
	b, err = withBudget.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"budget":{"tokens":5000,"usd":"0.25"}`) || !strings.Contains(string(b), `"version":2`) {
		t.Fatalf("bytes with a budget: %s", b)
	}
	got, err := ParseSubagentDoc(b)
	if err != nil || got.Budget != withBudget.Budget {
		t.Fatalf("round trip: %+v, %v", got.Budget, err)
	}
	forged := strings.Replace(string(b), `"version":2`, `"version":1`, 1)
	if _, err := ParseSubagentDoc([]byte(forged)); err == nil {
		t.Error("a version-1 document with a budget was read")
	}
	if _, err := ParseSubagentDoc([]byte(strings.Replace(string(b), `"tokens":5000`, `"tokens":-5`, 1))); err == nil {
		t.Error("a negative budget was read")
	}
}
