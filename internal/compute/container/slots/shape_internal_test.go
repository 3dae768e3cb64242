package slots

import (
	"testing"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// TestDockerShape_SystemTrustByPlace: two proxy dispatches, whose system trust stores are
// their own stages' files, have one docker slot shape (the file goes in the slot's place at
// the claim); a dispatch without the proxy has another. A writable bind there is no trust
// store a slot stages: its source stays in the shape, and it is never a staged place.
func TestDockerShape_SystemTrustByPlace(t *testing.T) {
	spec := func(binds ...compute.Bind) compute.Spec {
		return compute.Spec{Argv: []string{"/agora/bin/agora", "worker"}, Sandbox: compute.SandboxBwrap,
			Binds: append([]compute.Bind{{Src: "/h/worker", Dst: wire.BinPath}, {Src: "/stage/a/trust", Dst: wire.TrustPath}}, binds...)}
	}
	a := spec(compute.Bind{Src: "/stage/a/trust/ca-certificates.crt", Dst: wire.SystemTrustFile})
	b := spec(compute.Bind{Src: "/stage/b/trust/ca-certificates.crt", Dst: wire.SystemTrustFile})
	plain := spec()
	if dockerShape(a) != dockerShape(b) {
		t.Error("two proxy dispatches' shapes differ by their trust files' sources")
	}
	if dockerShape(a) == dockerShape(plain) {
		t.Error("a proxy dispatch and one without the proxy have one shape")
	}
	if a.Binds[2].Src != "/stage/a/trust/ca-certificates.crt" {
		t.Error("dockerShape changed its argument's binds")
	}
	wa := spec(compute.Bind{Src: "/x", Dst: wire.SystemTrustFile, Writable: true})
	wb := spec(compute.Bind{Src: "/y", Dst: wire.SystemTrustFile, Writable: true})
	if dockerShape(wa) == dockerShape(wb) || stagedBind(wa.Binds[2]) {
		t.Error("a writable bind at the system trust store counts by its place alone")
	}
	if !stagedBind(a.Binds[2]) || !placeIsFile(compute.Bind{Src: "/nonexistent", Dst: wire.SystemTrustFile}) {
		t.Error("the system trust store is no staged file place")
	}
}
