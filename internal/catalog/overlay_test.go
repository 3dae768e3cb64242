package catalog_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/catalog"
)

func TestCheckOverlayPattern(t *testing.T) {
	for _, p := range []string{".claude/**", "CLAUDE.md", "**", "docs/*.md", "a/**/b", ".github/workflows/*.yml"} {
		if err := catalog.CheckOverlayPattern(p); err != nil {
			t.Errorf("CheckOverlayPattern(%q) = %v, want nil", p, err)
		}
	}
	for p, want := range map[string]string{
		"":             "empty",
		"/etc/x":       "absolute",
		"../x":         "leaves the workspace",
		"a/../../x":    "leaves the workspace",
		"a//b":         "empty or '.'",
		"./a":          "empty or '.'",
		"a/**b":        "whole segment",
		"a\\b":         "backslash",
		"a\x00":        "NUL",
		"[":            "syntax error",
		".git/hooks/*": "checkout's .git",
		"a/.GIT/x":     "checkout's .git",
	} {
		err := catalog.CheckOverlayPattern(p)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckOverlayPattern(%q) = %v, want an error with %q", p, err, want)
		}
	}
}

func TestMatchOverlay(t *testing.T) {
	for _, tt := range []struct {
		pattern, name string
		want          bool
	}{
		{".claude/**", ".claude/settings.json", true},
		{".claude/**", ".claude/a/b/c", true},
		{".claude/**", ".claude", true}, // ** matches no segment: only a file named .claude
		{".claude/**", ".claudex/a", false},
		{"CLAUDE.md", "CLAUDE.md", true},
		{"CLAUDE.md", "docs/CLAUDE.md", false},
		{"**/CLAUDE.md", "docs/CLAUDE.md", true},
		{"**/CLAUDE.md", "CLAUDE.md", true},
		{"docs/*.md", "docs/a.md", true},
		{"docs/*.md", "docs/x/a.md", false},
		{"a/**/b", "a/b", true},
		{"a/**/b", "a/x/y/b", true},
		{"a/**/b", "a/x/y/c", false},
		{"**", "anything/at/all", true},
	} {
		if got := catalog.MatchOverlay(tt.pattern, tt.name); got != tt.want {
			t.Errorf("MatchOverlay(%q, %q) = %v, want %v", tt.pattern, tt.name, got, tt.want)
		}
	}
}

func TestOverlayFiles(t *testing.T) {
	files := []catalog.File{
		regular(".claude/settings.json", 0o644, "{}"),
		regular("CLAUDE.md", 0o644, "x"),
		regular("capability.yaml", 0o644, "overlay: ['**']"),
		regular("tool.sh", 0o755, "echo"),
	}
	got := catalog.OverlayFiles(catalog.CapabilityDoc{Overlay: []string{"**"}}, files)
	if strings.Join(got, ",") != ".claude/settings.json,CLAUDE.md,tool.sh" {
		t.Errorf("OverlayFiles(**) = %q: capability.yaml is never overlaid", got)
	}
	withGit := append(files, regular(".git/hooks/post-checkout", 0o755, "evil"), regular("sub/.Git/config", 0o644, "x"))
	if got := catalog.OverlayFiles(catalog.CapabilityDoc{Overlay: []string{"**"}}, withGit); strings.Join(got, ",") != ".claude/settings.json,CLAUDE.md,tool.sh" {
		t.Errorf("OverlayFiles(**) placed a file into a .git directory: %q", got)
	}
	if got := catalog.OverlayFiles(catalog.CapabilityDoc{}, files); len(got) != 0 {
		t.Errorf("no patterns overlay nothing, got %q", got)
	}
}

func TestCheckOverlayClash(t *testing.T) {
	var clash *catalog.OverlayClash
	err := catalog.CheckOverlayClash([]string{"a", "b"}, [][]string{{"CLAUDE.md", "x/y"}, {"CLAUDE.md"}})
	if !errors.As(err, &clash) || clash.Path != "CLAUDE.md" || clash.First != "a" || clash.Later != "b" {
		t.Errorf("same path: got %v", err)
	}
	err = catalog.CheckOverlayClash([]string{"a", "b"}, [][]string{{"x"}, {"x/y"}})
	if !errors.As(err, &clash) || clash.Path != "x" {
		t.Errorf("a file where the other needs a directory: got %v", err)
	}
	if err := catalog.CheckOverlayClash([]string{"a", "b"}, [][]string{{"x/y"}, {"x/z"}}); err != nil {
		t.Errorf("distinct files in one directory: %v", err)
	}
}

func TestParseCapabilityDoc_Overlay(t *testing.T) {
	g, err := catalog.ParseCapabilityDoc("capability.yaml", []byte("overlay: [\".claude/**\", CLAUDE.md]\n"), nil)
	if err != nil || strings.Join(g.Overlay, ",") != ".claude/**,CLAUDE.md" {
		t.Fatalf("ParseCapabilityDoc = %+v, %v", g.Overlay, err)
	}
	_, err = catalog.ParseCapabilityDoc("capability.yaml", []byte("overlay: [\"../x\", /abs]\n"), nil)
	if err == nil || !strings.Contains(err.Error(), "overlay[0]") || !strings.Contains(err.Error(), "overlay[1]") {
		t.Errorf("bad patterns: got %v, want both reported with their path", err)
	}
}

func FuzzMatchOverlay(f *testing.F) {
	for _, s := range [][2]string{{".claude/**", ".claude/a"}, {"**/x", "a/b/x"}, {"a/**/**/b", "a/b"}, {"[", "x"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, name string) {
		if catalog.CheckOverlayPattern(pattern) != nil || len(pattern) > 64 || len(name) > 256 {
			return
		}
		_ = catalog.MatchOverlay(pattern, name) // must not panic or hang
		if !strings.Contains(pattern, "*") && !strings.ContainsAny(pattern, "?[\\") && catalog.MatchOverlay(pattern, name) != (pattern == name) {
			t.Errorf("literal pattern %q vs %q", pattern, name)
		}
	})
}
