package dispatch_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/budget"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/runtime/claudert/anthropictest"
)

// TestModel_ClaudeCodeTokenBudget: claude-code against the faithful Anthropic fake, a model
// that asks for a tool on every turn (each turn 40 input tokens, 20 of them cached, 15 out):
// the gateway counts the Messages usage, refuses the call after the token budget is spent,
// and the dispatch ends budget-exceeded with the usage on the record.
func TestModel_ClaudeCodeTokenBudget(t *testing.T) {
	e := newModelEnv(t)
	e.d.Config.Models = budget.Prices{"test-model": {InputPerMTok: 1000, OutputPerMTok: 1000, CachedInputPerMTok: 100}}
	api, err := anthropictest.Start(testAnthropicKey, func(req anthropictest.Request) anthropictest.Reply {
		return anthropictest.Reply{
			Blocks: []anthropictest.Block{anthropictest.ToolUse(fmt.Sprintf("toolu_%02d", req.Turn), "Write", `{"file_path":"/agora/workspace/notes.md","content":"again\n"}`)},
			Usage:  anthropictest.Usage{InputTokens: 20, CacheReadInputTokens: 20, OutputTokens: 15},
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { api.Close() })
	e.capability("claude-bin", "tools: [write_file]\n", map[string]string{"bin/claude": string(fakeClaude(t))}, "bin/claude")
	e.modelSubagent("writer", "claude-code", "claude-bin")
	e.envBundle("anthropic", map[string]string{
		"ANTHROPIC_BASE_URL": api.URL,
		"PATH":               "/agora/capabilities/claude-bin/bin:/usr/bin:/bin",
		"FAKECLAUDE_MODE":    "api",
	}, map[string]string{"ANTHROPIC_API_KEY": testAnthropicKey})

	r := e.run(dispatch.Request{Subagent: "writer", Envs: []string{"anthropic"}, Input: []byte(`{"prompt":"write notes"}`),
		Budget: budget.Budget{Tokens: 150, USD: 1}})
	if r.State != lifecycle.DispatchFailed || r.Reason != lifecycle.ReasonBudgetExceeded || !strings.Contains(r.Detail, "token budget spent: 165 of 150 tokens") {
		t.Fatalf("got %s %s: %s, want failed budget-exceeded at 165 of 150 tokens (usage %+v, %d requests; stderr %s)", r.State, r.Reason, r.Detail, r.Usage, len(api.Requests()), e.blob(r.Result.Stderr))
	}
	// Three turns of 55 tokens: 165 >= 150, so the fourth call is refused and never sent.
	want := budget.Usage{InputTokens: 120, CachedTokens: 60, OutputTokens: 45, ModelCalls: 3, CostUSD: 0.111}
	if r.Usage == nil || *r.Usage != want {
		t.Fatalf("usage %+v, want %+v", r.Usage, want)
	}
	if n := len(api.Requests()); n != 3 {
		t.Errorf("the Messages API got %d requests, want 3", n)
	}
}
