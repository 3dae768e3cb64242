package codexadapter

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/runtime/agentrun"
	"github.com/agora-dev/agora/internal/secret/redact"
)

// TestRedTeam4_CodexGateJudgesPatchMoves: an apply_patch call whose patch
// moves a file out of the workspace, or names a path in (or through a link into) a .git
// directory, is refused by the relay's check, whichever way the model sends it (the custom
// tool's input, apply_patch as a function with {"input"}, the marker escaped in JSON,
// indented, in another case, after a carriage return); a move inside the workspace passes.
// Codex reports only a moved file's old path, so nothing after the relay would see where it
// went. Failed before: every one of these passed the gate.
func TestRedTeam4_CodexGateJudgesPatchMoves(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, ".git", "hooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.Symlink(".git", filepath.Join(dir, "meta"))
	os.Symlink(".git/hooks/pre-commit", filepath.Join(dir, "hook"))
	patch := func(move string) string {
		return "*** Begin Patch\n*** Update File: a.txt\n" + move + "\n@@\n-a\n+b\n*** End Patch\n"
	}
	for _, tc := range []struct {
		name    string
		event   string
		refused bool
	}{
		{"custom absolute", customCall(patch("*** Move to: /tmp/.bash_profile")), true},
		{"custom dot-dot", customCall(patch("*** Move to: ../../tmp/x")), true},
		{"custom blank destination", customCall(patch("*** Move to: ")), true},
		{"custom indented", customCall(patch("\t*** Move to: /tmp/x")), true},
		{"custom case", customCall(patch("*** MOVE TO: /tmp/x")), true},
		{"custom carriage return", customCall("*** Begin Patch\r*** Update File: a.txt\r*** Move to: /tmp/x\r*** End Patch"), true},
		{"custom leading blank in the path", customCall(patch("*** Move to:  /tmp/x")), true},
		{"function", functionCall(`{"input":` + jsonString(patch("*** Move to: /tmp/x")) + `}`), true},
		{"function escaped marker", functionCall(`{"input":"*** Begin Patch\n*** Update File: a.txt\n\u002a\u002a\u002a Move to: /tmp/x\n*** End Patch"}`), true},
		{"function duplicate input", functionCall(`{"input":"*** Begin Patch\n*** End Patch","input":"x"}`), true},
		{"function no input", functionCall(`{"patch":"x"}`), true},
		{"custom add into .git", customCall("*** Begin Patch\n*** Add File: .git/hooks/pre-commit\n+x\n*** End Patch\n"), true},
		{"custom update .git/config", customCall("*** Begin Patch\n*** Update File: .git/config\n@@\n+x\n*** End Patch\n"), true},
		{"custom nested .git", customCall("*** Begin Patch\n*** Add File: sub/.git/config\n+x\n*** End Patch\n"), true},
		{"custom through a link to .git", customCall("*** Begin Patch\n*** Add File: meta/config\n+x\n*** End Patch\n"), true},
		{"custom through a dangling link into .git", customCall("*** Begin Patch\n*** Add File: hook\n+x\n*** End Patch\n"), true},
		{"custom absolute add", customCall("*** Begin Patch\n*** Add File: /tmp/.gitconfig\n+x\n*** End Patch\n"), true},
		{"custom move into .git", customCall(patch("*** Move to: .git/config")), true},
		{"custom inside", customCall(patch("*** Move to: docs/a.md")), false},
		{"function inside", functionCall(`{"input":` + jsonString(patch("*** Move to: docs/a.md")) + `}`), false},
		{"custom content line naming a move", customCall("*** Begin Patch\n*** Add File: b.txt\n+*** Move to: /tmp/x\n*** End Patch\n"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := &memAuditor{}
			gw := agentrun.DialGateway(startGatewayAt(t, mem, "http://127.0.0.1:1/v1"))
			defer gw.Close()
			a := &codexAudit{ctx: t.Context(), gw: gw, red: redact.New(nil), dir: dir, seen: map[string]bool{}, shell: "/usr/bin/bash",
				grants: grant.Set{Tools: []string{"write_file"}}, stop: func(error) {}}
			var refused []string
			calls, why := eventCalls([]byte(tc.event))
			if why != "" {
				refused = append(refused, why)
			}
			for _, c := range calls {
				if c.Refused != "" {
					refused = append(refused, c.Refused)
					continue
				}
				if err := a.precheck(c); err != nil {
					refused = append(refused, err.Error())
				}
			}
			if got := len(refused) > 0; got != tc.refused {
				t.Errorf("refused = %v (%q), want %v", got, refused, tc.refused)
			}
			if calls := mem.Calls(); tc.refused && len(calls) > 0 && !strings.HasPrefix(calls[0], "apply_patch denied") {
				t.Errorf("tool.call entries %q, want apply_patch denied", calls)
			}
		})
	}
}

func customCall(input string) string {
	return `{"type":"response.output_item.done","item":{"type":"custom_tool_call","name":"apply_patch","call_id":"c1","input":` + jsonString(input) + `}}`
}

func functionCall(args string) string {
	return `{"type":"response.output_item.done","item":{"type":"function_call","name":"apply_patch","call_id":"c1","arguments":` + jsonString(args) + `}}`
}

func jsonString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// FuzzPatchPaths: patchPaths never panics, and every line that starts with one of Codex's
// exact file headers is among the paths it returns, with the path as Codex reads it.
func FuzzPatchPaths(f *testing.F) {
	f.Add("*** Begin Patch\n*** Update File: a\n*** Move to: /tmp/x\n@@\n-a\n+b\n*** End Patch\n")
	f.Add("*** move to:")
	f.Add("\r*** Move to: \xff")
	f.Fuzz(func(t *testing.T, patch string) {
		paths := patchPaths(patch)
		for _, line := range strings.Split(patch, "\n") {
			line = strings.TrimSuffix(line, "\r")
			for _, header := range []string{"*** Move to: ", "*** Add File: ", "*** Delete File: ", "*** Update File: "} {
				dest, ok := strings.CutPrefix(line, header)
				if !ok || strings.Contains(dest, "\r") {
					continue
				}
				found := false
				for _, m := range paths {
					if m == dest || strings.TrimSpace(m) == strings.TrimSpace(dest) {
						found = true
					}
				}
				if !found {
					t.Fatalf("the path %q of %q is not among %q", dest, header, paths)
				}
			}
		}
	})
}
