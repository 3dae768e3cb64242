package callerctx

import (
	"slices"
	"strings"
	"testing"
)

// TestProcess_Differ: the resident's context check names the parts of a CLI's process
// context that are not its own (an editor's terminal in another cgroup, a raised limit), and
// is never satisfied by a context read otherwise or not at all.
func TestProcess_Differ(t *testing.T) {
	self, err := ReadProcess(0)
	if err != nil {
		t.Fatal(err)
	}
	if got := self.Differ(self); len(got) != 0 {
		t.Errorf("this process against itself: %v differ", got)
	}
	other := slices.Clone(self)
	for i, p := range other {
		if p.name == "cgroup" || p.name == "limits" {
			other[i].sum = strings.Repeat("0", 64)
		}
	}
	if got := other.Differ(self); !slices.Equal(got, []string{"cgroup", "limits"}) {
		t.Errorf("another cgroup and limits: %v differ, want [cgroup limits]", got)
	}
	if got := self[:3].Differ(self); len(got) == 0 {
		t.Error("a context read in part passes for the whole")
	}
	if got := Process(nil).Differ(nil); len(got) == 0 {
		t.Error("two contexts never read pass for the same")
	}
}
