package plan_test

import (
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/budget"
	"github.com/agora-dev/agora/internal/orch/plan"
)

// TestParse_Budget: a plan's run budget and a task's narrowing are read, written canonically
// and read back equal; a task raising the plan's budget is an error naming the plan.
func TestParse_Budget(t *testing.T) {
	src := "version: 1\nname: nightly\nbudget: {tokens: 100000, usd: 2.5, model_calls: 40}\ntasks:\n  - {id: a, subagent: s, budget: {usd: 0.75}}\n  - {id: b, subagent: s}\n"
	p, err := plan.Parse("p.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if p.Budget != (budget.Budget{Tokens: 100000, USD: 2.5, ModelCalls: 40}) || p.Tasks[0].Budget() != (budget.Budget{USD: 0.75}) || !p.Tasks[1].Budget().IsZero() {
		t.Fatalf("budgets %+v %+v %+v", p.Budget, p.Tasks[0].Budget(), p.Tasks[1].Budget())
	}
	c := string(p.Canonical())
	if !strings.HasPrefix(c, `{"budget":{"model_calls":40,"tokens":100000,"usd":2.5},"concurrency":4,`) || !strings.Contains(c, `{"budget":{"usd":0.75},"id":"a"`) {
		t.Fatalf("canonical %s", c)
	}
	back, err := plan.Parse("c.json", []byte(c))
	if err != nil || back.Digest() != p.Digest() || back.Budget != p.Budget || back.Tasks[0].Budget() != p.Tasks[0].Budget() {
		t.Fatalf("round trip: %v", err)
	}
	// Without budgets the canonical form has no budget key: the digest of every plan written
	// before budgets existed is unchanged (TestCanonical pins one).
	plain, err := plan.Parse("p.yaml", []byte("version: 1\nname: nightly\ntasks: [{id: a, subagent: s}]\n"))
	if err != nil || strings.Contains(string(plain.Canonical()), "budget") {
		t.Fatalf("plain: %s %v", plain.Canonical(), err)
	}

	_, err = plan.Parse("p.yaml", []byte("version: 1\nname: nightly\nbudget: {tokens: 10}\ntasks: [{id: a, subagent: s, budget: {tokens: 11, model_calls: 3}}, {id: b, subagent: s, budget: {usd: -1}}]\n"))
	for _, want := range []string{
		`p.yaml:4: tasks[0].budget: budget tokens 11 is above the ceiling of 10 set by plan "nightly"`,
		`tasks[1].budget: budget usd -1: want 0 (no limit)`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want %q", err, want)
		}
	}
}
