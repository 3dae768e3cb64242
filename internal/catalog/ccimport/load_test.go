package ccimport

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/strictyaml"
)

// writeTree writes files (path -> content) under a new directory and returns it.
func writeTree(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, content := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func agentFile(name, tools string) string {
	return "---\nname: " + name + "\ndescription: " + name + " does things\ntools: " + tools + "\n---\nYou are " + name + ".\n"
}

func TestLoad(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"reviewer.md":      reviewer,
		"team/fixer.md":    agentFile("fixer", "Read, Edit, Bash(go test:*), WebFetch(domain:pkg.go.dev)"),
		"README.md":        "# Our agents\n",
		"notes.txt":        "not markdown",
		"team/helper.yaml": "name: nope\n",
	})
	s, err := Load(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, im := range s.Agents {
		names = append(names, im.Agent.Name+"@"+im.Agent.Rel)
	}
	if diff := cmp.Diff([]string{"code-reviewer@reviewer.md", "fixer@team/fixer.md"}, names); diff != "" {
		t.Errorf("agents (-want +got):\n%s", diff)
	}
	if len(s.Skipped) != 1 || s.Skipped[0].File != "README.md" {
		t.Errorf("skipped = %+v, want README.md only", s.Skipped)
	}
	fixer := s.Agents[1]
	want := grant.Set{
		Tools:    []string{"http_fetch", "read_file", "run_command", "write_file"},
		Commands: []string{"go test **"},
		Egress:   []grant.EgressRule{{Host: "pkg.go.dev"}},
	}
	if diff := cmp.Diff(want, fixer.Grant); diff != "" {
		t.Errorf("fixer's grant (-want +got):\n%s", diff)
	}
	if fixer.Capability != "fixer.claude-tools" || fixer.Model != "" || !strings.Contains(fixer.ModelNote, "claude's default") {
		t.Errorf("fixer: capability %q, model %q (%s)", fixer.Capability, fixer.Model, fixer.ModelNote)
	}
	if s.Agents[0].Model != "sonnet" {
		t.Errorf("reviewer's model = %q, want sonnet", s.Agents[0].Model)
	}
}

// TestLoad_Refusals: every problem of every file at once, each with its file and line; no
// set when there is one.
func TestLoad_Refusals(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"a-unmappable.md": agentFile("unmappable", "Read, NotebookEdit, Bash(git * main)"),
		"b-mcp.md":        agentFile("mcp-user", "Read, mcp__github__create_issue"),
		"c-notools.md":    "---\nname: everything\ndescription: gets it all\n---\nprompt\n",
		"d-bad.md":        "---\nname: bad\ndescription: [unclosed\n---\nprompt\n",
		"e-dup.md":        agentFile("twin", "Read"),
		"f-dup.md":        agentFile("twin", "Grep"),
		"g-model.md":      "---\nname: modelled\ndescription: d\ntools: Read\nmodel: gpt-5\n---\nprompt\n",
		"h-name.md":       agentFile("Bad_Name", "Read"),
		"i-long.md":       agentFile(strings.Repeat("n", 60), "Read"),
		"j-websearch.md":  agentFile("searcher", "WebSearch, WebFetch"),
		"k-\x1b[2J.md":    agentFile("escaped", "\"Bash(echo \\e[2J)\""),
		"ok.md":           agentFile("fine", "Read"),
	})
	s, err := Load(dir, nil)
	if s != nil || err == nil {
		t.Fatal("a directory with bad files loaded")
	}
	errs, ok := err.(strictyaml.Errors)
	if !ok {
		t.Fatalf("err %T: %v", err, err)
	}
	var got []string
	for _, e := range errs {
		got = append(got, strings.TrimPrefix(e.Error(), dir+"/"))
	}
	want := []string{
		"a-unmappable.md:4: tools: NotebookEdit: no agora grant gives claude \"NotebookEdit\"",
		"a-unmappable.md:4: tools: Bash(git * main): word \"*\" is a wildcard",
		"b-mcp.md:4: tools: mcp__github__create_issue: an MCP tool",
		"c-notools.md:2: tools: no tools: Claude Code gives such a subagent every tool",
		"d-bad.md:",
		"f-dup.md:2: name: subagent \"twin\" is also defined in " + dir + "/e-dup.md:2",
		"g-model.md:5: model: model \"gpt-5\": want sonnet, opus, haiku, fable, inherit",
		"h-name.md:2: name: invalid subagent name \"Bad_Name\"",
		"i-long.md:2: name: \"" + strings.Repeat("n", 60) + "\" is longer than 51 characters",
		"j-websearch.md:4: tools: WebSearch: server-side web search is never host-restricted",
		"j-websearch.md:4: tools: WebFetch: WebFetch without a domain reaches any host",
		`k-\x1b[2J.md:4: tools: Bash(echo \x1b[2J): command pattern "echo \x1b[2J": bad glob`,
	}
	for _, w := range want {
		if !containsPrefix(got, w) {
			t.Errorf("no problem %q; got:\n%s", w, strings.Join(got, "\n"))
		}
	}
	for _, g := range got {
		if strings.HasPrefix(g, "ok.md") || strings.HasPrefix(g, "e-dup.md") {
			t.Errorf("a good file has a problem: %s", g)
		}
		if strings.ContainsRune(g, 0x1b) {
			t.Errorf("a problem shows an escape character as it is: %q", g)
		}
	}
}

func containsPrefix(list []string, prefix string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

func TestLoad_DefaultTools(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"open.md":  "---\nname: open\ndescription: d\n---\nprompt\n",
		"own.md":   agentFile("own", "Glob"),
		"empty.md": "---\nname: empty\ndescription: d\ntools: []\n---\nprompt\n",
	})
	defaults, err := ParseDefaultTools("Read, Grep")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Load(dir, defaults)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, im := range s.Agents {
		got[im.Agent.Name] = append(im.Grant.Tools, map[bool]string{true: "default", false: "own"}[im.DefaultTools])
	}
	want := map[string][]string{
		"empty": {"read_file", "search_files", "default"},
		"open":  {"read_file", "search_files", "default"},
		"own":   {"list_files", "own"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("grants (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"Read, WebSearch", ",", "mcp__a__b"} {
		if _, err := ParseDefaultTools(bad); err == nil {
			t.Errorf("ParseDefaultTools(%q) accepted", bad)
		}
	}
}

func TestLoad_Limits(t *testing.T) {
	if _, err := Load(filepath.Join(t.TempDir(), "missing"), nil); err == nil {
		t.Error("a missing directory loaded")
	}
	empty := writeTree(t, map[string]string{"README.md": "hi\n"})
	if _, err := Load(empty, nil); err == nil || !strings.Contains(err.Error(), "no Claude Code subagent files") {
		t.Errorf("a directory without subagents: %v", err)
	}
	one := writeTree(t, map[string]string{"solo.md": agentFile("solo", "Read"), "other.md": agentFile("other", "Read")})
	s, err := Load(filepath.Join(one, "solo.md"), nil)
	if err != nil || len(s.Agents) != 1 || s.Agents[0].Agent.Name != "solo" {
		t.Errorf("one file: %+v, %v", s, err)
	}
	if _, err := Load(writeTree(t, map[string]string{"x.txt": "x"})+"/x.txt", nil); err == nil {
		t.Error("a file that is not .md loaded")
	}
	big := writeTree(t, map[string]string{"big.md": "---\nname: big\n---\n" + strings.Repeat("x", MaxFileSize)})
	if _, err := Load(big, nil); err == nil || !strings.Contains(err.Error(), "big.md: over the") {
		t.Errorf("an oversized file: %v", err)
	}
	// A symlinked directory is not entered; a symlink to a file is read.
	d := writeTree(t, map[string]string{"real/a.md": agentFile("a", "Read")})
	os.Symlink(filepath.Join(d, "real"), filepath.Join(d, "linked"))
	os.Symlink(filepath.Join(d, "real", "a.md"), filepath.Join(d, "b.md"))
	s, err = Load(d, nil)
	if err == nil || !strings.Contains(err.Error(), `subagent "a" is also defined`) {
		t.Errorf("a symlinked file is read as itself: %v %+v", err, s)
	}
}
