package suggest_test

import (
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/grant"
)

// TestRedTeam30_GeneralisedWordNeverClimbs: three commands under build/ become one pattern
// for build/'s entries; the pattern must not admit "build/.." (the workspace itself: `rm -rf
// build/..`), "build/.", nor a doubled slash that lets the rest climb ("build//.."): path.Match's
// "*" matches "..". Failed before: "rm -rf build/*" admitted "rm -rf build/..".
func TestRedTeam30_GeneralisedWordNeverClimbs(t *testing.T) {
	p := propose(t, grant.Set{}, false,
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
