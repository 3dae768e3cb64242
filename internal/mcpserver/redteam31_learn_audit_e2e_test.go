package mcpserver_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestRedTeam31_LearnTargetRefusalAudited (learn): an MCP client's
// agora_dispatch to a target a person put in mode: learn is refused (TestLearn_MCPCannotLearn),
// and the refusal must be on record as one: the audit log holds the call as denied, never as
// a call the server allowed. Found: the only entry is mcp.tool.call with decision allowed,
// written before the dispatcher refused, and the dispatcher records nothing.
func TestRedTeam31_LearnTargetRefusalAudited(t *testing.T) {
	home := newHome(t)
	if err := os.WriteFile(filepath.Join(home, "agora.yaml"), []byte("targets:\n  learning:\n    mode: learn\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cs := stdioSession(t, home, "--ceiling", "dispatch")
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "agora_dispatch", Arguments: map[string]any{"subagent": "rogue", "target": "learning"}})
	if err != nil || !res.IsError || !strings.Contains(text(res), "MCP client cannot start a learn dispatch") {
		t.Fatalf("agora_dispatch to a learn target: %v %v", err, res)
	}
	var log []struct {
		Kind    string         `json:"kind"`
		Details map[string]any `json:"details"`
	}
	if err := json.Unmarshal(agora(t, home, nil, "audit", "log", "-o", "json"), &log); err != nil {
		t.Fatal(err)
	}
	denied := false
	for _, e := range log {
		if e.Details["tool"] != "agora_dispatch" {
			continue
		}
		if e.Details["decision"] == "allowed" {
			t.Errorf("the refused learn dispatch is on record as allowed: %s %v", e.Kind, e.Details)
		}
		denied = denied || e.Details["decision"] == "denied"
	}
	if !denied {
		t.Errorf("no entry records the refusal of the learn dispatch as denied")
	}
}
