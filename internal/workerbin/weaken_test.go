package workerbin

import (
	"testing"

	"github.com/agora-dev/agora/internal/version"
)

// TestBuild_WeakenedWorkerIsNoRealAgorasWorker: a worker built with -tags agora_weaken vouches
// for the final.md the agent left (selftest's control test's worker); it has the same version
// and commit as the real one, so the pin compares the tag, both ways, or a weakened worker in
// AGORA_HOME/bin (or beside agora) is bound into a real agora's sandboxes.
func TestBuild_WeakenedWorkerIsNoRealAgorasWorker(t *testing.T) {
	const rev = "0123456789abcdef0123456789abcdef01234567"
	real := Build{Version: "(devel)", Revision: rev, Modified: "false"}
	weak := real
	weak.Tags = version.WeakenTag
	for _, tc := range []struct {
		name      string
		want, got Build
		ok        bool
	}{
		{"real agora, weakened worker", real, weak, false},
		{"weakened agora, real worker", weak, real, false},
		{"test agora (no build information), weakened worker", Build{}, weak, false},
		{"weakened both", weak, weak, true},
		{"real both", real, real, true},
		{"another tag", real, Build{Version: "(devel)", Revision: rev, Modified: "false", Tags: "netgo"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.want.accepts(tc.got); got != tc.ok {
				t.Errorf("%s accepts %s: %v, want %v", tc.want, tc.got, got, tc.ok)
			}
		})
	}
	if s := weak.String(); s == real.String() {
		t.Errorf("a weakened worker is named as the real one: %q", s)
	}
}
