package ccimport

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/strictyaml"
)

// reviewer is a subagent file as Claude Code's /agents wizard writes one: the description
// quoted with its newlines escaped, tools comma-separated, a model alias and a color.
const reviewer = `---
name: code-reviewer
description: "Use this agent after writing code.\\nExamples: <example>user: \"review it\"</example>"
tools: Read, Grep, Glob, Bash(git diff:*)
model: sonnet
color: blue
---

You are a careful code reviewer.
Report what you find.
`

func TestParse(t *testing.T) {
	a, skip, err := Parse("agents/reviewer.md", "reviewer.md", []byte(reviewer))
	if err != nil || skip != "" {
		t.Fatalf("Parse: skip %q, err %v", skip, err)
	}
	want := &Agent{
		File: "agents/reviewer.md", Rel: "reviewer.md", SHA256: a.SHA256,
		Name:        "code-reviewer",
		Description: "Use this agent after writing code.\nExamples: <example>user: \"review it\"</example>",
		Tools:       []Tool{{"Read", 4}, {"Grep", 4}, {"Glob", 4}, {"Bash(git diff:*)", 4}},
		ToolsSet:    true, Model: "sonnet",
		Prompt:   "You are a careful code reviewer.\nReport what you find.",
		NameLine: 2, ToolsLine: 4, ModelLine: 5,
	}
	if diff := cmp.Diff(want, a); diff != "" {
		t.Errorf("agent (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(string(a.SHA256), "sha256:") {
		t.Errorf("digest %q", a.SHA256)
	}
}

func TestParse_Forms(t *testing.T) {
	tests := []struct {
		name  string
		src   string
		tools []Tool
		set   bool
	}{
		{"crlf", "---\r\nname: a\r\ndescription: d\r\ntools: Read, Edit\r\n---\r\nprompt\r\n", []Tool{{"Read", 4}, {"Edit", 4}}, true},
		{"spaces", "---\nname: a\ndescription: d\ntools: Read Grep Bash(git status)\n---\np\n", []Tool{{"Read", 4}, {"Grep", 4}, {"Bash(git status)", 4}}, true},
		{"list", "---\nname: a\ndescription: d\ntools:\n  - Read\n  - \"Bash(git diff:*)\"\n  - Grep, Glob\n---\np\n",
			[]Tool{{"Read", 5}, {"Bash(git diff:*)", 6}, {"Grep", 7}, {"Glob", 7}}, true},
		{"comma in parentheses", "---\nname: a\ndescription: d\ntools: Bash(a b,c), Read\n---\np\n", []Tool{{"Bash(a b,c)", 4}, {"Read", 4}}, true},
		{"absent", "---\nname: a\ndescription: d\n---\np\n", nil, false},
		{"empty string", "---\nname: a\ndescription: d\ntools: \"\"\n---\np\n", nil, false},
		{"empty list", "---\nname: a\ndescription: d\ntools: []\n---\np\n", nil, false},
		{"null", "---\nname: a\ndescription: d\ntools:\n---\np\n", nil, false},
		{"trailing blanks on the fences", "--- \nname: a\ndescription: d\ntools: Read\n---\t\np\n", []Tool{{"Read", 4}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, skip, err := Parse("f.md", "f.md", []byte(tt.src))
			if err != nil || skip != "" {
				t.Fatalf("skip %q, err %v", skip, err)
			}
			if diff := cmp.Diff(tt.tools, a.Tools); diff != "" {
				t.Errorf("tools (-want +got):\n%s", diff)
			}
			if a.ToolsSet != tt.set {
				t.Errorf("ToolsSet = %v, want %v", a.ToolsSet, tt.set)
			}
			if a.Prompt != "prompt" && a.Prompt != "p" {
				t.Errorf("prompt = %q", a.Prompt)
			}
		})
	}
}

func TestParse_Skips(t *testing.T) {
	for _, src := range []string{"# README\n", "", "\ufeff---\nname: a\n---\np\n", "text\n---\nname: a\n---\n"} {
		a, skip, err := Parse("f.md", "f.md", []byte(src))
		if a != nil || err != nil || !strings.Contains(skip, "Claude Code skips it too") {
			t.Errorf("%q: agent %v, skip %q, err %v; want skipped", src, a, skip, err)
		}
	}
}

// TestParse_Problems: each problem names the file and the line, and every problem of a
// file is reported at once.
func TestParse_Problems(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string // "LINE: substring", in order
	}{
		{"unclosed", "---\nname: a\n", []string{"1: never closed"}},
		{"missing name and description", "---\ntools: Read\n---\np\n", []string{"2: name is required", "2: description is required"}},
		{"empty body", "---\nname: a\ndescription: d\ntools: Read\n---\n\n  \n", []string{"6: body (the subagent's system prompt) is empty"}},
		{"bad yaml", "---\nname: a\ndescription: Use this. Examples: user: hi\ntools: Read\n---\np\n",
			[]string{"3: mapping values are not allowed", "3: quote a value"}},
		{"unsupported fields", "---\nname: a\ndescription: d\ntools: Read\npermissionMode: acceptEdits\nhooks: {}\nmcpServers: [github]\n---\np\n",
			[]string{"5: permissionMode: a Claude Code field agora does not support: agora runs claude in dontAsk mode",
				"6: hooks: a Claude Code field agora does not support", "7: mcpServers: a Claude Code field agora does not support"}},
		{"unknown field", "---\nname: a\ndescription: d\ntols: Read\n---\np\n", []string{`4: tols: unknown field "tols"`}},
		{"duplicate key", "---\nname: a\nname: b\ndescription: d\n---\np\n", []string{"3: name: duplicate key (first at line 2)"}},
		{"tools a mapping", "---\nname: a\ndescription: d\ntools: {Read: true}\n---\np\n", []string{"4: tools: want a comma-separated string"}},
		{"tools list of mappings", "---\nname: a\ndescription: d\ntools:\n  - Read\n  - {x: 1}\n---\np\n", []string{"6: tools[1]: want a tool"}},
		{"alias", "---\nname: &n a\ndescription: *n\n---\np\n", []string{"2: name: anchors and aliases are not allowed", "3: description: anchors"}},
		{"two documents", "---\nname: a\ndescription: d\n---\np\n", nil},
		{"not utf-8", "---\nname: \xff\n---\np\n", []string{"0: not UTF-8"}},
		{"nul", "---\nname: a\x00\n---\np\n", []string{"0: not UTF-8"}},
		{"too large", "---\nname: a\ndescription: d\ntools: Read\n---\n" + strings.Repeat("x", MaxFileSize), []string{"0: over the"}},
		{"front matter too large", "---\nname: a\ndescription: \"" + strings.Repeat("x", maxFrontMatter) + "\"\n---\np\n", []string{"1: front matter is over"}},
		{"hidden in the description", "---\nname: a\ndescription: \"safe\\u202Eesrever\"\ntools: Read\n---\np\n", []string{"3: description: holds U+202E"}},
		{"escape in the name", "---\nname: \"a\\e[2J\"\ndescription: d\ntools: Read\n---\np\n", []string{"2: name: holds U+001B"}},
		{"hidden in the prompt", "---\nname: a\ndescription: d\ntools: Read\n---\nline one\nDo \u2066this\u2069 quietly\n", []string{"7: the prompt holds U+2066"}},
		{"a lone carriage return in the prompt", "---\nname: a\ndescription: d\ntools: Read\n---\nover\rwritten\n", []string{"6: the prompt holds U+000D"}},
		{"description too long", "---\nname: a\ndescription: \"" + strings.Repeat("x", 1025) + "\"\ntools: Read\n---\np\n", []string{"3: description: 1025 bytes; a subagent's description in agora is at most 1024"}},
		{"too many tools", "---\nname: a\ndescription: d\ntools: " + strings.Repeat("Read,", maxTools+1) + "\n---\np\n", []string{"4: tools: 257 tools; at most 256"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, _, err := Parse("f.md", "f.md", []byte(tt.src))
			if tt.want == nil {
				if err != nil {
					t.Fatalf("err %v", err)
				}
				return
			}
			if a != nil || err == nil {
				t.Fatalf("agent %+v, err nil; want problems", a)
			}
			errs, ok := err.(strictyaml.Errors)
			if !ok {
				t.Fatalf("err is %T, want strictyaml.Errors", err)
			}
			var got []string
			for _, e := range errs {
				if e.File != "f.md" {
					t.Errorf("problem %q names file %q", e.Msg, e.File)
				}
				got = append(got, e.Error())
			}
			for _, w := range tt.want {
				line, sub, _ := strings.Cut(w, ": ")
				found := false
				for _, e := range errs {
					if strings.Contains(e.Error(), sub) && (line == "0" && e.Line == 0 || line != "0" && strings.HasPrefix(e.Error(), "f.md:"+line+":")) {
						found = true
					}
				}
				if !found {
					t.Errorf("no problem at line %s saying %q; got:\n%s", line, sub, strings.Join(got, "\n"))
				}
			}
		})
	}
}

func TestSplitTools(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"Read, Grep, Glob", []string{"Read", "Grep", "Glob"}},
		{"Read,Grep", []string{"Read", "Grep"}},
		{" Read \t Grep\n", []string{"Read", "Grep"}},
		{"Bash(git log --format=%H,%s), Read", []string{"Bash(git log --format=%H,%s)", "Read"}},
		{"Bash(a (b, c)), Read", []string{"Bash(a (b, c))", "Read"}},
		{"Bash(unclosed, Read", []string{"Bash(unclosed, Read"}},
		{"a), b", []string{"a)", "b"}},
		{",, ,", nil},
		{"", nil},
	}
	for _, tt := range tests {
		if got := SplitTools(tt.in); !cmp.Equal(tt.want, got) {
			t.Errorf("SplitTools(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// FuzzParse: any bytes parse, are skipped or give problems that each name the file; never a
// panic. What parses maps or gives problems with lines inside the file, and what maps is a
// grant the runtime translates back exactly.
func FuzzParse(f *testing.F) {
	for _, s := range []string{reviewer, "---\nname: a\ndescription: d\ntools:\n  - Read\n  - Grep, Glob\n---\np\n",
		"---\r\nname: a\r\n---\r\n", "---\n---\n", "---\nname: a\ndescription: d\ntools: Bash(x), WebFetch(domain:a.b), mcp__x\nmodel: inherit\n---\nq",
		"---\nname: [\n---\n", "---\nhooks: {a: [1, {b: c}]}\n---\n", "--- \nname: a\n---\t\n\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		a, skip, err := Parse("f.md", "f.md", src)
		switch {
		case err != nil:
			errs, ok := err.(strictyaml.Errors)
			if !ok || len(errs) == 0 {
				t.Fatalf("err %T %v, want strictyaml.Errors", err, err)
			}
			lines := strings.Count(string(src), "\n") + 1
			for _, e := range errs {
				if e.File != "f.md" || e.Line < 0 || e.Line > lines+2 {
					t.Fatalf("problem %q at %s:%d of a %d-line file", e.Msg, e.File, e.Line, lines)
				}
			}
			return
		case skip != "":
			if a != nil {
				t.Fatal("skipped with an agent")
			}
			return
		}
		im, errs := Map(a, nil)
		if len(errs) > 0 {
			return
		}
		if !a.ToolsSet {
			t.Fatal("mapped a file without tools and no defaults")
		}
		for _, tm := range im.Tools {
			if tm.Refused != "" {
				t.Fatalf("mapped with a refused entry %q", tm.Entry)
			}
		}
	})
}
