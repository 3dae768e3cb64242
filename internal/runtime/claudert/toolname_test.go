package claudert

import "testing"

// TestAgoraTool_AgreesWithTheTranslation: every Claude Code name AgoraTool reads back is one
// the grant translation gives claude for that agora tool, so a reader of claude's audit and
// the runtime never disagree on what a name means.
func TestAgoraTool_AgreesWithTheTranslation(t *testing.T) {
	for _, name := range []string{ccRead, ccEdit, ccWrite, ccGlob, ccGrep, ccBash} {
		tool, ok := AgoraTool(name)
		if !ok || tool == "" {
			t.Fatalf("AgoraTool(%q) = %q, %v", name, tool, ok)
		}
		g := Grants{}
		g.Tools = []string{tool}
		if tool == "run_command" {
			g.Commands = []string{"git status"}
		}
		found := false
		for _, c := range Tools(g) {
			found = found || c == name
		}
		if !found {
			t.Errorf("AgoraTool(%q) = %q, but a grant of %q gives claude %v", name, tool, tool, Tools(g))
		}
	}
	if tool, ok := AgoraTool(ccTodoWrite); !ok || tool != "" {
		t.Errorf("TodoWrite: %q, %v; want no grant needed", tool, ok)
	}
	for _, name := range []string{"WebSearch", "Agent", "mcp__x__y", "read_file", ""} {
		if tool, ok := AgoraTool(name); ok {
			t.Errorf("AgoraTool(%q) = %q: a name claude's translation never gives", name, tool)
		}
	}
}
