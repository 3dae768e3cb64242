package mcpserver_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTools_NoApproval: approving or denying a held call is a person's act on the host's CLI
// (agora dispatch approve/deny), never an MCP tool, so an AI client cannot approve its own
// sub-agents' calls. No listed tool is named for it or takes a call id, and neither the MCP
// server nor its host adapter reaches the one function that decides an approval.
func TestTools_NoApproval(t *testing.T) {
	cs := stdioSession(t, newHome(t))
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tools) == 0 {
		t.Fatal("no tools listed: the check proves nothing")
	}
	for _, tl := range res.Tools {
		name := strings.ToLower(tl.Name)
		for _, word := range []string{"approv", "deny", "decide"} {
			if strings.Contains(name, word) {
				t.Errorf("tool %q looks like it decides approvals", tl.Name)
			}
		}
		schema, _ := tl.InputSchema.(map[string]any)
		props, _ := schema["properties"].(map[string]any)
		for _, banned := range []string{"call_id", "call", "approve", "decision", "args_digest"} {
			if _, ok := props[banned]; ok {
				t.Errorf("tool %q takes %q: approvals are never decided over MCP", tl.Name, banned)
			}
		}
	}
	for _, dir := range []string{".", "../mcphost"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no sources in %s: %v", dir, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(b), "DecideApproval") {
				t.Errorf("%s calls DecideApproval: approvals must never be decided over MCP", f)
			}
		}
	}
}
