package slots

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/container"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// slotTestProvider is a docker target's warm provider on the test engine ($DOCKER_HOST, as
// scripts/podman.sh serves it) and toolchain image, keeping its slots' state in home.
func slotTestProvider(t *testing.T, home string) *Provider {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIP: docker warm slots need root (a uid of the sandbox range per slot)")
	}
	img := os.Getenv("AGORA_TOOLCHAIN_IMAGE")
	host := os.Getenv("DOCKER_HOST")
	if img == "" || host == "" {
		t.Skip("SKIP: set DOCKER_HOST (scripts/podman.sh) and AGORA_TOOLCHAIN_IMAGE (scripts/images.sh toolchain)")
	}
	cp, err := container.New(t.Context(), container.Options{Host: host, Image: img})
	if err != nil {
		t.Skipf("SKIP: no engine at %s: %v", host, err)
	}
	t.Cleanup(func() { cp.Close() })
	return New(cp, Options{Home: home, Version: "test"})
}

// slotWorker builds the worker program, which serves a slot container's entrypoint (its
// token to fd 3), as shipped (static).
func slotWorker(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "agora-worker")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "../../../../cmd/agora-worker") // make build's flags: its cache serves
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the worker: %v\n%s", err, out)
	}
	return bin
}

func openWarmer(t *testing.T, p *Provider) *Warmer {
	t.Helper()
	wm, err := p.Warmer(compute.WarmOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	w := wm.(*Warmer)
	if err := w.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// A docker slot is started by its target's provider (its image, runtime, CPUs): another
// target's warmer handed it MUST refuse it, discarded, before anything of its spec is
// exported or bound to it, whatever the two targets' shapes; else a dispatch of one target
// runs in the other's container.
func TestWarmer_RefusesAnotherProvidersSlot(t *testing.T) {
	home, err := os.MkdirTemp("", "agwf")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	a, b := openWarmer(t, slotTestProvider(t, home)), openWarmer(t, slotTestProvider(t, home))
	tmpl := compute.Spec{Argv: []string{"/bin/sh", "-c", "sleep 600"}, Env: []string{"PATH=/usr/bin:/bin"},
		Binds: []compute.Bind{{Src: slotWorker(t), Dst: wire.BinPath}},
		RunAs: &compute.HostUser{UID: 0x70008000 + 4242, GID: 0x70008000 + 4242}}
	slot, err := a.Fill(t.Context(), tmpl)
	if err != nil {
		t.Fatalf("fill: %v", err)
	}
	discarded := false
	t.Cleanup(func() {
		if !discarded {
			slot.Discard()
		}
	})
	if a.Shape(tmpl) != b.Shape(tmpl) {
		t.Fatal("the two targets' shapes differ: the attack needs them equal")
	}
	spec := tmpl
	spec.ID = "01FOREIGNSLOT"
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	h, err := b.Run(ctx, slot, spec, nil)
	discarded = true // Run spends the slot whatever happens
	if err == nil {
		h.Wait()
		t.Fatal("another target's warmer ran a dispatch in this target's slot")
	}
	if !errors.Is(err, compute.ErrSlotShape) {
		t.Fatalf("another target's warmer took the slot to its claim (%v), want it refused as not its own (ErrSlotShape)", err)
	}
	if slot.Alive() {
		t.Error("the refused slot still runs")
	}
	if ents, _ := os.ReadDir(b.g.claimedDir()); len(ents) != 0 {
		t.Errorf("claim marks left: %v", ents)
	}
}

// A slot no docker warmer made (another provider's, or none) is refused and discarded.
func TestWarmer_RefusesASlotOfAnotherKind(t *testing.T) {
	p := New(nil, Options{Home: t.TempDir()})
	wm, err := p.Warmer(compute.WarmOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeSlot{}
	if _, err := wm.Run(t.Context(), f, compute.Spec{ID: "01OTHERKIND"}, nil); !errors.Is(err, compute.ErrSlotShape) {
		t.Fatalf("run of a foreign slot: %v, want ErrSlotShape", err)
	}
	if f.discarded != 1 {
		t.Errorf("foreign slot discarded %d times, want once", f.discarded)
	}
}

type fakeSlot struct{ discarded int }

func (f *fakeSlot) Shape() string { return "" }
func (f *fakeSlot) Alive() bool   { return f.discarded == 0 }
func (f *fakeSlot) Discard()      { f.discarded++ }
