package orch

import (
	"bytes"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/budget"
	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/api"
)

// TestPrintRunHeader_Usage: orch status shows the run's usage against its budget.
func TestPrintRunHeader_Usage(t *testing.T) {
	var errOut bytes.Buffer
	f := cmdutil.NewFactory(&cmdutil.IOStreams{In: strings.NewReader(""), Out: &bytes.Buffer{}, ErrOut: &errOut}, func(string) string { return "" })
	printRunHeader(f, api.Run{ID: "r", Name: "n", State: lifecycle.RunFailed, Budget: &budget.Budget{ModelCalls: 4},
		Usage: &budget.Usage{InputTokens: 200, OutputTokens: 20, ModelCalls: 4, CostUSD: 0.4}})
	if want := "usage: 200 in (0 cached), 20 out, 4 calls, $0.4 of budget model_calls 4\n"; !strings.Contains(errOut.String(), want) {
		t.Errorf("status header lacks %q:\n%s", want, errOut.String())
	}
}
