package dispatch_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/catalog/provision"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/runtime/runtimes"
)

// The approval refusal is decided from the runtimes table now.
// Every runtime against every kind of grant, with what each runtime can do written out here by
// name (not read from the table), so a wrong table row fails: codex (approval_policy "never")
// is refused any approve rule; exec is judged on its command (granted, and not marked for
// approval); claude-code and openai hold calls and are never refused here.
func TestRedTeam28V_ApprovalRefusalForEveryRuntime(t *testing.T) {
	cmd := []string{"git", "push", "origin"}
	grants := map[string]grant.Set{
		"none":          {Tools: []string{"write_file"}, Commands: []string{"git push *"}},
		"tool approve":  {Tools: []string{"write_file"}, Commands: []string{"git push *"}, Approve: []grant.ApproveRule{{Tool: "write_file"}}},
		"cmd approve":   {Commands: []string{"git push *"}, Approve: []grant.ApproveRule{{Command: "git push *"}}},
		"other approve": {Commands: []string{"git push *"}, Approve: []grant.ApproveRule{{Command: "rm *"}}},
		"no commands":   {Tools: []string{"write_file"}},
	}
	refused := map[string]map[string]string{ // runtime -> grant -> what the refusal says ("" = none)
		"exec": {"none": "", "tool approve": "", "cmd approve": "exec runtime cannot hold a call", "other approve": "",
			"no commands": "the dispatch's grant has no commands"},
		"codex": {"none": "", "tool approve": "codex runtime cannot hold a call", "cmd approve": "codex runtime cannot hold a call",
			"other approve": "codex runtime cannot hold a call", "no commands": ""},
		"claude-code": {},
		"openai":      {},
	}
	if len(runtimes.All()) != len(refused) {
		t.Fatalf("the table has %d runtimes, this test knows %d: say what a new one may do", len(runtimes.All()), len(refused))
	}
	for _, rt := range runtimes.All() {
		want, ok := refused[rt.Name]
		if !ok {
			t.Fatalf("runtime %s unknown to this test", rt.Name)
		}
		for gname, g := range grants {
			doc := catalog.SubagentDoc{Runtime: rt.Name}
			if rt.Name == "exec" {
				doc.Command = cmd
			}
			got := dispatch.CheckCommand(doc, g)
			if w := want[gname]; (w == "") != (got == "") || !strings.Contains(got, w) {
				t.Errorf("%s under %q: CheckCommand = %q, want %q", rt.Name, gname, got, w)
			}
		}
	}
}

// A document whose runtime the table does not hold exactly
// (a catalog written by an older or tampered agora: provision refuses these) is refused at
// accept with its name and the known ones, never judged as a runtime with no needs: before,
// one with a command ran past the command check ("Exec" is not exec) and one with approve
// rules was refused as "the  runtime".
func TestRedTeam28V_UnknownRuntimeRefusedAtAccept(t *testing.T) {
	for _, rt := range []string{"", "Exec", "EXEC", "Codex", "claude_code", "codex ", "ｃodex"} {
		for _, g := range []grant.Set{{}, {Commands: []string{"*"}, Approve: []grant.ApproveRule{{Tool: "write_file"}}}} {
			got := dispatch.CheckCommand(catalog.SubagentDoc{Runtime: rt, Command: []string{"rm", "-rf", "/"}}, g)
			want := "is not one of exec, claude-code, openai, codex"
			if !strings.Contains(got, want) || !strings.Contains(got, `"`+rt+`"`) {
				t.Errorf("runtime %q, grant %+v: CheckCommand = %q, want a refusal naming it and containing %q", rt, g, got, want)
			}
		}
	}
}

// Through provision and Accept, a codex subagent whose
// capability marks any call for approval (a tool, or a command codex would run itself) is
// failed as denied at accept and never started; the same subagent under the same capability
// without the approve rule is not refused for it.
func TestRedTeam28V_CodexApproveRefusedThroughAccept(t *testing.T) {
	e := newEnv(t)
	for i, capYAML := range []string{
		"tools: [write_file]\napprove: [{tool: write_file}]\n",
		"commands: [\"git push *\"]\napprove: [{command: \"git push *\"}]\n",
		"tools: [write_file]\ncommands: [\"git push *\"]\n",
	} {
		held := strings.Contains(capYAML, "approve")
		capDir := t.TempDir()
		os.WriteFile(capDir+"/capability.yaml", []byte(capYAML), 0o644)
		name := fmt.Sprintf("held%d", i)
		pc, err := e.w.PrepareCapability(name, capDir, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := e.w.Register(t.Context(), "test", "register", pc); err != nil {
			t.Fatal(err)
		}
		sub := fmt.Sprintf("cx%d", i)
		p, err := e.w.PrepareSubagent(t.Context(), sub, provision.SubagentSpec{Runtime: "codex", Model: "gpt-5", SystemPrompt: "p",
			Capabilities: []string{name}}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := e.w.Register(t.Context(), "test", "register", p); err != nil {
			t.Fatal(err)
		}
		r, err := e.d.Accept(t.Context(), dispatch.Request{Subagent: sub, Actor: "test", Timeout: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if !held {
			if r.State == lifecycle.DispatchFailed || strings.Contains(r.Detail, "cannot hold a call") {
				t.Errorf("%s: got %s %s %q, want it accepted (nothing marked for approval)", capYAML, r.State, r.Reason, r.Detail)
			}
			continue
		}
		if r.State != lifecycle.DispatchFailed || r.Reason != lifecycle.ReasonDenied || !strings.Contains(r.Detail, "codex runtime cannot hold a call") {
			t.Errorf("%s: got %s %s %q, want failed denied: the codex runtime cannot hold a call", capYAML, r.State, r.Reason, r.Detail)
		}
	}
}
