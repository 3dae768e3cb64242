package suggest_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/grant"
)

// TestPropose_FileWouldDeny (file.would_deny): a write outside the workspace proposes
// nothing (a grant holds no file paths); it is listed under what suggest refused, with the
// path, op and tool, and one a process in the sandbox reported (no worker key) is listed as
// one the agent could have forged. 10,000 of them cost the listing's cap, not a grant.
func TestPropose_FileWouldDeny(t *testing.T) {
	ents := []ent{
		{entry.FileWouldDeny, map[string]any{entry.KeyPath: "/etc/app.conf", entry.KeyOp: "write", entry.KeyTool: "write_file", entry.KeyReporter: "worker", entry.KeyReason: "path outside the workspace"}},
		{entry.FileWouldDeny, map[string]any{entry.KeyPath: "/home/x/.npmrc", entry.KeyOp: "edit", entry.KeyTool: "Edit", entry.KeyReporter: "hook"}},
		{entry.FileWouldDeny, map[string]any{entry.KeyPath: "/etc/forged", entry.KeyOp: "write", entry.KeyTool: "write_file", entry.KeyReporter: "sandbox"}},
	}
	for i := range 10_000 {
		ents = append(ents, ent{entry.FileWouldDeny, map[string]any{entry.KeyPath: fmt.Sprintf("/tmp/flood/%d", i), entry.KeyOp: "write", entry.KeyTool: "write_file", entry.KeyReporter: "worker"}})
	}
	p := propose(t, grant.Set{}, false, ents...)
	if len(p.Grant.Tools) != 0 || len(p.Grant.Commands) != 0 || len(p.Grant.Egress) != 0 {
		t.Errorf("writes outside the workspace proposed %+v", p.Grant)
	}
	if len(p.Refused) != 100 || p.RefusedMore != 10_003-100 {
		t.Errorf("refused %d listed and %d more, want 100 and %d", len(p.Refused), p.RefusedMore, 10_003-100)
	}
	reasons := map[string]string{}
	for _, r := range p.Refused {
		if r.Kind == "file" {
			reasons[r.Item] = r.Reason
		}
	}
	if r := reasons["/etc/app.conf (write) by write_file"]; !strings.Contains(r, "no grant allows it") {
		t.Errorf("the worker's write is listed as %q", r)
	}
	if r := reasons["/home/x/.npmrc (edit) by Edit"]; !strings.Contains(r, "no grant allows it") {
		t.Errorf("the hook's edit is listed as %q", r)
	}
	if r := reasons["/etc/forged (write) by write_file"]; !strings.Contains(r, "could have forged") {
		t.Errorf("the forged write is listed as %q", r)
	}
}
