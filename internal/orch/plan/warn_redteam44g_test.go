package plan_test

import (
	"strings"
	"testing"
)

// TestRedTeam44G_WarningsSeeWhatAGlobAdmits: validate's advice judges a changes glob by the
// paths it admits, not by its spelling. A glob that admits every path as "**" does, however it
// is written, gets the "**" warning; one that admits a file a test runner reads at the root of
// the tree (conftest.py, unittest/__main__.py, GNUmakefile ...) reopens runner shadowing and is
// warned about; a glob that admits the files under a directory is not told to add "/**".
func TestRedTeam44G_WarningsSeeWhatAGlobAdmits(t *testing.T) {
	dirs := []string{"src", "src/pkg", "tests"}
	for _, c := range []struct {
		glob string
		want string // a part of the one warning wanted; "" none
	}{
		{"**", `"**" admits every path, as no changes would`},
		{"**/*", `"**/*" admits every path, as no changes would`},
		{"**/**", `"**/**" admits every path, as no changes would`},
		{"*/**", `"*/**" admits every path, as no changes would`},
		{"{**,docs/**}", `"{**,docs/**}" admits every path, as no changes would`},
		{"**/*.py", `"**/*.py" admits conftest.py at the root of the tree`},
		{"*.py", `"*.py" admits conftest.py at the root of the tree`},
		{"*", `"*" admits conftest.py at the root of the tree`},
		{"**/__main__.py", `"**/__main__.py" admits unittest/__main__.py at the root of the tree`},
		{"*makefile", `"*makefile" admits GNUmakefile at the root of the tree`},
		{"src/**", ""},
		{"src/**/*", ""}, // the files under src/pkg: no "/**" to add
		{"src/**/*.py", ""},
		{"docs/*.md", ""},
		{"README.md", ""},
		{"src/*", `"src/*" matches "src/pkg", a directory of the base tree`},
	} {
		t.Run(c.glob, func(t *testing.T) {
			p := mustParse(t, head+"  - {id: a, subagent: s, verify: {command: [t], changes: ['"+c.glob+"']}}\n")
			var got []string
			for _, w := range p.GateWarnings(dirs) {
				got = append(got, w.String())
			}
			if c.want == "" {
				if len(got) > 0 {
					t.Fatalf("warnings %q, want none", got)
				}
				return
			}
			found := false
			for _, w := range got {
				found = found || strings.HasPrefix(w, "tasks[0].verify.changes[0]: ") && strings.Contains(w, c.want)
			}
			// A glob admitting every path gets that warning alone: no advice to add "/**".
			if every := strings.Contains(c.want, "admits every path"); !found || every && len(got) != 1 {
				t.Fatalf("warnings %q, want one at tasks[0].verify.changes[0] with %q", got, c.want)
			}
		})
	}
	// Each warning names its own glob's place.
	p := mustParse(t, head+"  - {id: a, subagent: s, verify: {command: [t], changes: ['src/**', '**/*', tests]}}\n")
	var got []string
	for _, w := range p.GateWarnings(dirs) {
		got = append(got, w.Path)
	}
	if strings.Join(got, " ") != "tasks[0].verify.changes[1] tasks[0].verify.changes[2]" {
		t.Errorf("warnings at %q", got)
	}
	// Protect globs are a deny-list: admitting is not what they do, so only their directory
	// advice applies.
	p = mustParse(t, head+"  - {id: a, subagent: s, verify: {command: [t], changes: ['src/**'], protect: ['**/*.py', '**']}}\n")
	if w := p.GateWarnings(dirs); len(w) != 0 {
		t.Errorf("protect globs warned about as changes: %v", w)
	}
}
