package suggest_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/grant/suggest"
)

// TestRedTeam30_GeneralisedWordNeverClimbs: three commands under build/ become one pattern
// for build/'s entries; the pattern must not admit "build/.." (the workspace itself: `rm -rf
// build/..`), "build/.", nor a doubled slash that lets the rest climb ("build//.."): path.Match's
// "*" matches "..". Failed before: "rm -rf build/*" admitted "rm -rf build/..".
func TestRedTeam30_GeneralisedWordNeverClimbs(t *testing.T) {
	p := proposeLearn(t, grant.Set{}, false,
		ent{entry.ToolWouldDeny, wouldDenyCmd("rm", "-rf", "build/a")},
		ent{entry.ToolWouldDeny, wouldDenyCmd("rm", "-rf", "build/b")},
		ent{entry.ToolWouldDeny, wouldDenyCmd("rm", "-rf", "build/c")},
		ent{entry.ToolWouldDeny, wouldDenyCmd("cat", "/tmp/x/a")},
		ent{entry.ToolWouldDeny, wouldDenyCmd("cat", "/tmp/x/b")},
		ent{entry.ToolWouldDeny, wouldDenyCmd("cat", "/tmp/x/c")},
	)
	if len(p.Grant.Commands) != 2 {
		t.Fatalf("want two generalised patterns, got %q", p.Grant.Commands)
	}
	for _, tc := range []struct {
		argv []string
		want bool
	}{
		{[]string{"rm", "-rf", "build/zz"}, true},
		{[]string{"rm", "-rf", "build/.."}, false},
		{[]string{"rm", "-rf", "build/."}, false},
		{[]string{"rm", "-rf", "build//.."}, false},
		{[]string{"rm", "-rf", "build/.git"}, false},
		{[]string{"cat", "/tmp/x/.."}, false},
		{[]string{"cat", "/tmp/x//.."}, false},
	} {
		if got := admits(p.Grant, tc.argv...); got != tc.want {
			t.Errorf("%q admits %q = %v, want %v", p.Grant.Commands, tc.argv, got, tc.want)
		}
	}
	for _, it := range p.Items {
		if it.Kind == "command" && it.Basis == "generalised" && !strings.Contains(it.Text, "not") {
			t.Errorf("the plain-language line of %q does not say what it leaves out: %q", it.Grant, it.Text)
		}
	}
}

// TestRedTeam30_WriteDirTrailingSlashLink: --out given as "link/" (as a shell's completion
// writes a directory) where link is a symlink to another capability's directory (one holding
// only its capability.yaml: a patch can plant such a link in a checkout) must not be written
// through, with --force or without: lstat of "link/" follows the link. Failed before: with
// --force, the other capability's capability.yaml was replaced.
func TestRedTeam30_WriteDirTrailingSlashLink(t *testing.T) {
	other := filepath.Join(t.TempDir(), "other")
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(other, "capability.yaml")
	if err := os.WriteFile(victim, []byte("tools: [read_file]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "learned")
	if err := os.Symlink(other, link); err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{link + "/", link + "//", link + "/.", link} {
		for _, force := range []bool{false, true} {
			if err := suggest.WriteDir(out, []byte("tools: []\n"), force); err == nil {
				t.Errorf("WriteDir(%q, force=%v) wrote through a symlink", out, force)
			}
		}
	}
	if b, _ := os.ReadFile(victim); string(b) != "tools: [read_file]\n" {
		t.Fatalf("the other capability's file changed: %q", b)
	}
}

// TestRedTeam30_NeverRootThroughAnotherSpelling: generalisation never proposes "/*" (any
// top-level directory); it must not do so through another spelling of "/" either: "//",
// "/./" or "/tmp/../" as the common prefix ("rm -rf //a", "//b", "//c" must not become a
// pattern admitting "rm -rf //usr"). Failed before: "rm -rf //[^./]*" admitted "//usr".
func TestRedTeam30_NeverRootThroughAnotherSpelling(t *testing.T) {
	for _, pre := range []string{"//", "/./", "/tmp/../", "///", "/tmp/./../"} {
		p := proposeLearn(t, grant.Set{}, false,
			ent{entry.ToolWouldDeny, wouldDenyCmd("rm", "-rf", pre+"a")},
			ent{entry.ToolWouldDeny, wouldDenyCmd("rm", "-rf", pre+"b")},
			ent{entry.ToolWouldDeny, wouldDenyCmd("rm", "-rf", pre+"c")},
		)
		if admits(p.Grant, "rm", "-rf", pre+"usr") {
			t.Errorf("prefix %q: %q admits rm -rf %susr", pre, p.Grant.Commands, pre)
		}
	}
}
