package dispatch

import (
	"testing"

	"github.com/agora-dev/agora/internal/config"
)

// TestStageIsolation_ClaimsOnlyWhatBoundsTheSandbox: the record's disk token is disk-quota
// only when the sandbox writes on the stage's quota. A kubernetes pod writes its own
// emptyDirs, which no quota of the stage bounds, so its record says disk-unenforced even
// when the stage's copy sits on one.
func TestStageIsolation_ClaimsOnlyWhatBoundsTheSandbox(t *testing.T) {
	const pod = "kubernetes+restricted+readonly+nonroot+netpol"
	for _, tc := range []struct {
		name, provider string
		st             stage
		want           string
	}{
		{"local on a quota", "bwrap+rlimits+runas", stage{sandboxed: true, disk: "/q"}, "bwrap+rlimits+runas+disk-quota"},
		{"local without one", "bwrap+rlimits", stage{sandboxed: true}, "bwrap+rlimits+disk-unenforced"},
		{"sandbox none", "none", stage{disk: "/q"}, "none"},
		{"pod, the stage on a quota", pod, stage{sandboxed: true, disk: "/q", podFiles: true}, pod + "+disk-unenforced"},
		{"pod, no quota", pod, stage{sandboxed: true, podFiles: true}, pod + "+disk-unenforced"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.st.isolation(tc.provider); got != tc.want {
				t.Errorf("isolation(%q) = %q, want %q", tc.provider, got, tc.want)
			}
		})
	}
	for provider, want := range map[string]bool{config.ProviderKubernetes: true, config.ProviderLocal: false, config.ProviderDocker: false} {
		if got := limitsFor(config.Target{Provider: provider}, "", "01J00000000000000000000000").podFiles; got != want {
			t.Errorf("limitsFor(provider %s).podFiles = %v, want %v", provider, got, want)
		}
	}
}
