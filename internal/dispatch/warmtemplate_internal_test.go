package dispatch

import (
	"testing"

	"github.com/agora-dev/agora/internal/compute"
)

// TestParseTemplate_RoundTrip: what writeTemplate stores reads back with the same shape.
func TestParseTemplate_RoundTrip(t *testing.T) {
	dir := t.TempDir()
	spec := compute.Spec{Argv: []string{"/agora/bin/agora-worker", "worker"}, Env: []string{"PATH=/usr/bin", "AGORA_DISPATCH_ID=X"}, Dir: "/agora/workspace",
		Binds:  []compute.Bind{{Src: "/host/a", Dst: "/agora/bundle"}, {Src: "/usr/bin/claude", Dst: "/usr/local/bin/claude"}},
		Limits: compute.Limits{MaxProcs: 64}}
	if err := writeTemplate(dir, "local", spec); err != nil {
		t.Fatal(err)
	}
	got, err := readTemplate(dir, "local")
	if err != nil {
		t.Fatal(err)
	}
	if want := templateOf(dir, "local", spec).ID; got.ID != want {
		t.Errorf("shape read back %s, want %s", got.ID, want)
	}
}
