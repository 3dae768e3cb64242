package verdict

import (
	"strings"
	"testing"
)

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		glob, path string
		want       bool
	}{
		{"**/*_test.go", "a_test.go", true},
		{"**/*_test.go", "x/y/a_test.go", true},
		{"**/*_test.go", ".hidden_test.go", true},
		{"**/*_test.go", "x/a_test.go/b", false},
		{"**/*_test.go", "a_test.gox", false},
		{"*_test.go", "x/a_test.go", false},
		{".github/**", ".github", true},
		{".github/**", ".github/workflows/ci.yml", true},
		{".github/**", ".githubx", false},
		{".github/**", "x/.github", false},
		{"**", "anything/at/all", true},
		{"a/**/b", "a/b", true},
		{"a/**/b", "a/x/y/b", true},
		{"a/**/b", "a/x/y/c", false},
		{"a/**/**/b", "a/b", true},
		{"testdata/?.txt", "testdata/x.txt", true},
		{"testdata/?.txt", "testdata/é.txt", true},
		{"testdata/?.txt", "testdata/xy.txt", false},
		{"[a-c]*.go", "b.go", true},
		{"[!a-c]*.go", "b.go", false},
		{"[^a-c]*.go", "d.go", true},
		{"[]]x", "]x", true},
		{`\*.go`, "*.go", true},
		{`\*.go`, "a.go", false},
		{"**/*.{go,mod}", "a/go.mod", true},
		{"**/*.{go,mod}", "a/b.go", true},
		{"**/*.{go,mod}", "a/b.sum", false},
		{"{cmd,internal}/**/*_test.go", "internal/x/y_test.go", true},
		{"{a,{b,c}}.txt", "c.txt", true},
		{"*a*a*a*a*a*b", strings.Repeat("a", 200), false},
		{"Makefile", "makefile", false},
	} {
		got, err := Match(c.glob, c.path)
		if err != nil {
			t.Errorf("Match(%q): %v", c.glob, err)
			continue
		}
		if got != c.want {
			t.Errorf("Match(%q, %q) = %v, want %v", c.glob, c.path, got, c.want)
		}
	}
}

func TestCheckPattern_Refuses(t *testing.T) {
	for _, p := range []string{"", "/abs", "a/", "a//b", "./a", "a/../b", "a**", "**a/b", "[abc", `a\`, "{a,b", "a}b",
		strings.Repeat("a", MaxPatternBytes+1), "a\x00b", "\xff", "{a,}/b", strings.Repeat("{a,b}", 9)} {
		if err := CheckPattern(p); err == nil {
			t.Errorf("CheckPattern(%q) = nil, want an error", p)
		}
	}
	for _, p := range []string{"**", "a/**", `a\**`, "{a,b}/**", "[*]x"} {
		if err := CheckPattern(p); err != nil {
			t.Errorf("CheckPattern(%q) = %v, want nil", p, err)
		}
	}
}

func TestMatcher_NamesTheGlob(t *testing.T) {
	m, err := NewMatcher([]string{".github/**", "**/*_test.go"})
	if err != nil {
		t.Fatal(err)
	}
	if g, ok := m.Match("pkg/a_test.go"); !ok || g != "**/*_test.go" {
		t.Errorf("got %q %v, want **/*_test.go true", g, ok)
	}
	if _, ok := m.Match("pkg/a.go"); ok {
		t.Error("pkg/a.go matched")
	}
	if _, err := NewMatcher([]string{"ok", "a//b"}); err == nil || !strings.Contains(err.Error(), `"a//b"`) {
		t.Errorf("got %v, want an error naming the bad glob", err)
	}
}
