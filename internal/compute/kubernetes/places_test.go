package kubernetes

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/remote"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// A pool pod's places are a proxy template's read-only binds: the bundle
// and its manifest (a file, by its place when its source is gone), the capability files, the
// inputs, the trust directory and the system trust store (a file); never the worker binary
// (the slot's own), the gateway's socket directory (the worker listens there) or a writable
// bind.
func TestPlaces_ProxyTemplate(t *testing.T) {
	gone := "/nonexistent/stage"
	tmpl := compute.Spec{Argv: []string{wire.BinPath, "worker"}, Binds: []compute.Bind{
		{Src: gone + "/bin", Dst: wire.BinPath},
		{Src: gone + "/shared", Dst: wire.BundlePath},
		{Src: gone + "/bundle/manifest.json", Dst: wire.BundlePath + "/" + wire.ManifestFile},
		{Src: gone + "/ws", Dst: wire.WorkspacePath, Writable: true},
		{Src: gone + "/out", Dst: wire.OutPath, Writable: true, Result: true},
		{Src: gone + "/caps", Dst: wire.CapabilityFilesPath},
		{Src: gone + "/in", Dst: wire.InputsPath},
		{Src: gone + "/gw", Dst: wire.GatewayPath},
		{Src: gone + "/trust", Dst: wire.TrustPath},
		{Src: gone + "/trust/ca-certificates.crt", Dst: wire.SystemTrustFile},
	}}
	want := []remote.SlotPlace{
		{Dst: wire.BundlePath},
		{Dst: wire.BundlePath + "/" + wire.ManifestFile, File: true},
		{Dst: wire.CapabilityFilesPath},
		{Dst: wire.InputsPath},
		{Dst: wire.TrustPath},
		{Dst: wire.SystemTrustFile, File: true},
	}
	got := Places(tmpl)
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Places (-want +got):\n%s", d)
	}
	if err := remote.CheckSlotPlaces(got); err != nil {
		t.Errorf("the places fail their check: %v", err)
	}
}
