package remote

import (
	"strings"
	"testing"
)

// TestIdentity: a release's version stands alone; a build without a version, or from a
// modified tree, is told apart by its digest, so two such builds never compare equal (the
// "dev" == "dev" a stale image would pass), and a host with no digest matches nothing.
func TestIdentity(t *testing.T) {
	a, b := strings.Repeat("a", 64), strings.Repeat("b", 64)
	for _, tt := range []struct{ version, sha, want string }{
		{"v1.2.3", a, "v1.2.3"},
		{"v0.0.0-20261124120000-abcdef012345", a, "v0.0.0-20261124120000-abcdef012345"},
		{"(devel)", a, "dev+sha256:" + a},
		{"", a, "dev+sha256:" + a},
		{"dev", a, "dev+sha256:" + a},
		{"v0.0.0-20261124120000-abcdef012345+dirty", a, "v0.0.0-20261124120000-abcdef012345+dirty+sha256:" + a},
		{"(devel)", "", "dev+sha256:unknown"},
	} {
		if got := Identity(tt.version, tt.sha); got != tt.want {
			t.Errorf("Identity(%q, %q) = %q, want %q", tt.version, tt.sha, got, tt.want)
		}
	}
	if Identity("(devel)", a) == Identity("(devel)", b) {
		t.Error("two unversioned builds with different bytes compare equal")
	}
	if Identity("(devel)", "") == Identity("(devel)", a) {
		t.Error("a host without a worker digest matches a worker")
	}
}
