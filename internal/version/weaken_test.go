package version

import (
	"runtime/debug"
	"strings"
	"testing"
)

// TestWeakenedBuildSaysSo: a build with -tags agora_weaken (selftest's control test's, whose
// controls are off on purpose) carries the same module version and commit as a real one, so
// `agora version` must name its tags, or the weakened agora passes for the real one.
func TestWeakenedBuildSaysSo(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/agora-dev/agora", Version: "(devel)"},
		Settings: []debug.BuildSetting{{Key: "-tags", Value: "netgo," + WeakenTag}, {Key: "vcs.revision", Value: "bedde79"}, {Key: "vcs.modified", Value: "false"}}}
	v := From(bi)
	if v.Tags != "netgo,"+WeakenTag || !v.Weakened() {
		t.Fatalf("From = %+v, want its tags and weakened", v)
	}
	if got := v.Text(); !strings.Contains(got, WeakenTag) || !strings.Contains(got, "not for use") {
		t.Errorf("Text() = %q, want it to name %s and say the build is not for use", got, WeakenTag)
	}
	var b strings.Builder
	if err := v.WriteJSON(&b); err != nil || !strings.Contains(b.String(), `"tags": "netgo,`+WeakenTag+`"`) {
		t.Errorf("WriteJSON = %s (%v), want the tags", b.String(), err)
	}
	real := From(&debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "-tags", Value: "agora_weakened,netgo"}}})
	if real.Weakened() || strings.Contains(real.Text(), "not for use") {
		t.Errorf("a build tagged agora_weakened (another tag) is taken for a weakened one: %q", real.Text())
	}
}
