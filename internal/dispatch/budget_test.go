package dispatch_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/budget"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/runtime/openairt/openaitest"
)

// TestModel_SpendingBudgets: a scripted model that keeps calling tools is stopped by the
// gateway at the token, the usd and the call budget, each time failed budget-exceeded with
// the usage on the record, the refusal audited as denied, and the terminal audit entry
// carrying the usage. The worker runs in real bubblewrap.
func TestModel_SpendingBudgets(t *testing.T) {
	e := newModelEnv(t)
	// $0.001 a token in, $0.002 out.
	e.d.Config.Models = budget.Prices{"test-model": {InputPerMTok: 1000, OutputPerMTok: 2000}}
	e.capability("lister", "tools: [list_files]\n", nil)
	e.modelSubagent("looper", "openai", "lister")
	for _, tc := range []struct {
		name  string
		b     budget.Budget
		spent func(u budget.Usage) bool
		want  string
	}{
		{"Tokens", budget.Budget{Tokens: 150}, func(u budget.Usage) bool { return u.Tokens() >= 150 }, "token budget spent"},
		{"USD", budget.Budget{USD: 0.08}, func(u budget.Usage) bool { return u.CostUSD >= 0.08 }, "usd budget spent"},
		{"Calls", budget.Budget{ModelCalls: 3}, func(u budget.Usage) bool { return u.ModelCalls == 3 }, "model call budget spent: 3 of 3 calls"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := e.model(testAPIKey, openaitest.Loop())
			r := e.run(dispatch.Request{Subagent: "looper", Envs: []string{"model"}, Timeout: 2 * time.Minute, Budget: tc.b})
			if r.State != lifecycle.DispatchFailed || r.Reason != lifecycle.ReasonBudgetExceeded || !strings.Contains(r.Detail, tc.want) {
				t.Fatalf("got %s %s: %s, want failed budget-exceeded saying %q", r.State, r.Reason, r.Detail, tc.want)
			}
			if r.Sandbox != "bwrap" || r.Isolation == "" {
				t.Errorf("ran with sandbox %q isolation %q, want bubblewrap", r.Sandbox, r.Isolation)
			}
			if r.Budget == nil || *r.Budget != tc.b {
				t.Errorf("record budget %+v, want %+v", r.Budget, tc.b)
			}
			u := r.Usage
			if u == nil || !tc.spent(*u) {
				t.Fatalf("record usage %+v does not show the budget spent", u)
			}
			n := len(srv.Accepted())
			if int64(n) != u.ModelCalls || n >= 50 {
				t.Errorf("the model answered %d requests, the record counts %d calls; want equal and under the 50-turn limit", n, u.ModelCalls)
			}
			var denied int
			for _, a := range e.audited(r, "tool.gateway") {
				if a.Details["decision"] == "denied" && strings.HasPrefix(a.Details["reason"].(string), "budget exceeded: ") {
					denied++
					if !strings.Contains(a.Actor, "looper@sha256:") {
						t.Errorf("refusal audited as %q, want the role", a.Actor)
					}
				}
			}
			if denied == 0 {
				t.Error("no denied tool.gateway entry for the refused model call")
			}
			ended := e.audited(r, "dispatch.failed")
			if len(ended) != 1 {
				t.Fatalf("%d dispatch.failed entries", len(ended))
			}
			au, _ := ended[0].Details["usage"].(map[string]any)
			if au == nil || fmt.Sprint(au["model_calls"]) != fmt.Sprint(u.ModelCalls) || fmt.Sprint(au["input_tokens"]) != fmt.Sprint(u.InputTokens) {
				t.Errorf("terminal audit usage %v, want the record's %+v", ended[0].Details["usage"], u)
			}
		})
	}
}

// TestModel_UsageWithoutBudget: a dispatch without a budget still has its usage recorded.
func TestModel_UsageWithoutBudget(t *testing.T) {
	e := newModelEnv(t)
	e.capability("lister", "tools: [list_files]\n", nil)
	e.modelSubagent("talker", "openai", "lister")
	e.model(testAPIKey, openaitest.CallTool("list_files", "{}"), openaitest.Say("done"))
	r := e.run(dispatch.Request{Subagent: "talker", Envs: []string{"model"}})
	wantFinished(t, r)
	if r.Budget != nil || r.Usage == nil || r.Usage.ModelCalls != 2 || r.Usage.InputTokens == 0 || r.Usage.CostUSD != 0 {
		t.Fatalf("budget %+v usage %+v, want none and 2 calls counted at no price", r.Budget, r.Usage)
	}
}

// TestBudget_NarrowNeverRaises: a dispatch may narrow the target's and the subagent's
// budgets, never raise them; a usd budget without a price is refused before anything is
// recorded (fail closed).
func TestBudget_NarrowNeverRaises(t *testing.T) {
	e := newModelEnv(t)
	tgt := e.d.Config.Targets[config.DefaultTarget]
	tgt.Budget = budget.Budget{Tokens: 1000, ModelCalls: 10}
	e.d.Config.Targets[config.DefaultTarget] = tgt
	e.capability("lister", "tools: [list_files]\n", nil)
	e.modelSubagent("looper", "openai", "lister")
	e.model(testAPIKey, openaitest.Say("done"))

	accept := func(b budget.Budget) (*dispatch.Record, error) {
		return e.d.Accept(t.Context(), dispatch.Request{Subagent: "looper", Envs: []string{"model"}, Budget: b, Actor: "test"})
	}
	_, err := accept(budget.Budget{Tokens: 2000})
	var re *dispatch.RequestError
	if !errors.As(err, &re) || !strings.Contains(err.Error(), `budget tokens 2000 is above the ceiling of 1000 set by target "local"`) {
		t.Fatalf("raising the target's budget: %v", err)
	}
	r, err := accept(budget.Budget{Tokens: 500})
	if err != nil {
		t.Fatal(err)
	}
	if r.Budget == nil || *r.Budget != (budget.Budget{Tokens: 500, ModelCalls: 10}) {
		t.Errorf("effective budget %+v, want tokens narrowed, calls from the target", r.Budget)
	}
	_, err = accept(budget.Budget{USD: 1})
	if !errors.As(err, &re) || !strings.Contains(err.Error(), `needs a price for model "test-model"`) {
		t.Fatalf("usd budget without a price: %v", err)
	}
	// A ceiling from the caller (a plan) narrows without an error.
	r, err = e.d.Accept(t.Context(), dispatch.Request{Subagent: "looper", Envs: []string{"model"}, Actor: "test",
		Ceilings: []budget.Ceiling{{Source: "plan run", Budget: budget.Budget{ModelCalls: 2}}}})
	if err != nil || r.Budget == nil || r.Budget.ModelCalls != 2 {
		t.Fatalf("with a plan ceiling: %+v %v", r.Budget, err)
	}
}

// TestBudget_ResumeKeepsTheParentsBudget: the answer to a dispatch that needed input runs
// under the budget its parent ran under, not the wider ceilings the parent narrowed.
func TestBudget_ResumeKeepsTheParentsBudget(t *testing.T) {
	e := newModelEnv(t)
	e.capability("asker", "tools: [ask_human]\n", nil)
	e.modelSubagent("asker", "openai", "asker")
	e.model(testAPIKey, openaitest.CallTool("ask_human", `{"question":"which one?"}`), openaitest.Say("done"))
	parent := e.run(dispatch.Request{Subagent: "asker", Envs: []string{"model"}, Budget: budget.Budget{ModelCalls: 7}})
	if parent.State != lifecycle.DispatchNeedsInput {
		t.Fatalf("parent %s %s: %s", parent.State, parent.Reason, parent.Detail)
	}
	req, err := e.d.ResumeRequest(t.Context(), parent, "the first", dispatch.Answerer{Actor: "test", Via: dispatch.ViaCLI})
	if err != nil {
		t.Fatal(err)
	}
	child := e.run(req)
	if child.Budget == nil || *child.Budget != (budget.Budget{ModelCalls: 7}) {
		t.Fatalf("child budget %+v, want the parent's", child.Budget)
	}
}
