package dispatchcmd

import (
	"bytes"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/budget"
	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// TestNewDispatchRunCmd_Budget maps --budget-* to the request's narrowing (stopping after
// parsing: nothing is dispatched); a negative value is a usage error.
func TestNewDispatchRunCmd_Budget(t *testing.T) {
	for _, tt := range []struct {
		args    []string
		want    budget.Budget
		wantErr string
	}{
		{args: nil},
		{args: []string{"--budget-tokens", "5000", "--budget-usd", "0.25", "--budget-calls", "9"}, want: budget.Budget{Tokens: 5000, USD: 0.25, ModelCalls: 9}},
		{args: []string{"--budget-calls", "-1"}, wantErr: "budget model_calls -1"},
	} {
		got, err := parseRun(append([]string{"--subagent", "s"}, tt.args...)...)
		if tt.wantErr != "" {
			if _, usage := err.(*cmdutil.UsageError); !usage || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%v: Execute = %v, want a usage error containing %q", tt.args, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if got.req.Budget != tt.want {
			t.Errorf("%v: request budget %+v, want %+v", tt.args, got.req.Budget, tt.want)
		}
	}
}

// TestPrintRecord_Usage: describe shows the budget and the usage against it.
func TestPrintRecord_Usage(t *testing.T) {
	var b bytes.Buffer
	printRecord(&b, &dispatch.Record{ID: "d", State: lifecycle.DispatchFailed, Reason: lifecycle.ReasonBudgetExceeded,
		Budget: &budget.Budget{ModelCalls: 3},
		Usage:  &budget.Usage{InputTokens: 120, CachedTokens: 20, OutputTokens: 12, ModelCalls: 3, CostUSD: 0.0144}})
	for _, want := range []string{"reason:    budget-exceeded\n", "budget:    model_calls 3\n",
		"usage:     120 in (20 cached), 12 out, 3 calls, $0.0144 of budget model_calls 3\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("describe output lacks %q:\n%s", want, b.String())
		}
	}
}
