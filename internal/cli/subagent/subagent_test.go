package subagent

import (
	"bytes"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/budget"
	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/grant"
)

// TestPrintSubagent_Budget: subagent show names the subagent's budget.
func TestPrintSubagent_Budget(t *testing.T) {
	var b bytes.Buffer
	printSubagent(&b, catalog.Version{Name: "fixer"}, catalog.SubagentDoc{Runtime: "openai", Budget: budget.Budget{USD: 0.5, ModelCalls: 20}}, grant.Set{})
	if want := "budget:       usd 0.5, model_calls 20 (a dispatch may narrow it)\n"; !strings.Contains(b.String(), want) {
		t.Errorf("show output lacks %q:\n%s", want, b.String())
	}
}
