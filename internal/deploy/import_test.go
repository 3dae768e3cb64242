package deploy_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/deploy"
)

const importAgent = "---\nname: %s\ndescription: helps\ntools: %s\n---\nYou help.\n"

func agentMD(name, tools string) string {
	return strings.Replace(strings.Replace(importAgent, "%s", name, 1), "%s", tools, 1)
}

// TestCheck_Import: a manifest's import: entries, in both forms, go through the import:
// each file becomes a capability and a claude-code subagent in the plan, and the apply's
// summary records the files by digest.
func TestCheck_Import(t *testing.T) {
	h, w := newWriter(t)
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"agora-manifest.yaml":        "version: 1\nimport:\n  - .claude/agents\n  - {from: extra/open.md, default_tools: \"Read, Grep\"}\n",
		".claude/agents/reviewer.md": agentMD("reviewer", "Read, Bash(git diff:*)"),
		".claude/agents/README.md":   "# agents\n",
		"extra/open.md":              "---\nname: open\ndescription: no tools\n---\nYou read.\n",
	})
	src, pendings, err := deploy.Check(t.Context(), filepath.Join(dir, "agora-manifest.yaml"), w, getenv(nil))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range pendings {
		got = append(got, string(p.Kind)+" "+p.Name)
	}
	if strings.Join(got, ", ") != "capability reviewer.claude-tools, subagent reviewer, capability open.claude-tools, subagent open" {
		t.Errorf("pendings = %v", got)
	}
	if n := len(src.Imports()); n != 2 || src.Imports()[1].Agents[0].DefaultTools != true {
		t.Errorf("imports = %d sets, the second's defaults not used", n)
	}
	changes, err := w.Plan(t.Context(), pendings, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Apply(t.Context(), "ci", "register", changes, src.Summary("ci", changes, false)); err != nil {
		t.Fatal(err)
	}
	var summary string
	h.DB.SQL().QueryRow(`SELECT entry FROM audit_entries WHERE kind = 'catalog.apply'`).Scan(&summary)
	for _, want := range []string{`"imported_files":[`, `"file":"reviewer.md"`, `"file":"open.md"`, `"subagent":"reviewer"`} {
		if !strings.Contains(summary, want) {
			t.Errorf("summary %s lacks %s", summary, want)
		}
	}
	v, err := w.Reader().Resolve(t.Context(), catalog.KindSubagent, "reviewer")
	if err != nil || v.Meta.Runtime != "claude-code" {
		t.Errorf("reviewer: %+v, %v", v, err)
	}
}

// TestCheck_ImportProblems: an import's problems join the manifest's in one report, each
// with its file and line, and nothing is prepared.
func TestCheck_ImportProblems(t *testing.T) {
	_, w := newWriter(t)
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"agora-manifest.yaml": "version: 1\ncapabilities:\n  - {name: tools, from: caps/tools}\n" +
			"subagents:\n  - {name: reviewer, runtime: exec, command: [true], capabilities: [tools]}\n" +
			"import:\n  - agents\n  - {from: more, default_tools: WebSearch}\n  - {default_tools: Read}\n",
		"caps/tools/capability.yaml": "commands: [\"true\"]\n",
		"agents/reviewer.md":         agentMD("reviewer", "Read"),
		"agents/mcp.md":              agentMD("mcp", "mcp__github__create_issue"),
		"more/x.md":                  agentMD("x", "Read"),
	})
	_, pendings, err := deploy.Check(t.Context(), filepath.Join(dir, "agora-manifest.yaml"), w, getenv(nil))
	if err == nil || pendings != nil {
		t.Fatalf("a manifest with bad imports was prepared: %v", pendings)
	}
	for _, want := range []string{
		"agora-manifest.yaml:8: import[1].default_tools: WebSearch: server-side web search",
		"agora-manifest.yaml:9: import[2]: from (a .claude/agents directory or a .md file) is required",
		filepath.Join(dir, "agents", "mcp.md") + ":4: tools: mcp__github__create_issue: an MCP tool",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("problems lack %q:\n%v", want, err)
		}
	}
	// Fixed, the MCP file gone: the name the import would register is the manifest's too.
	writeTree(t, dir, map[string]string{"agora-manifest.yaml": "version: 1\ncapabilities:\n  - {name: tools, from: caps/tools}\n" +
		"subagents:\n  - {name: reviewer, runtime: exec, command: [true], capabilities: [tools]}\nimport: [agents]\n"})
	if err := removeFile(filepath.Join(dir, "agents", "mcp.md")); err != nil {
		t.Fatal(err)
	}
	_, _, err = deploy.Check(t.Context(), filepath.Join(dir, "agora-manifest.yaml"), w, getenv(nil))
	if want := `reviewer.md:2: name: subagent "reviewer" that import[0] imports is also declared at subagents[0]`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a name declared twice: %v; want %q", err, want)
	}
}

func removeFile(p string) error { return os.Remove(p) }
