package local

import (
	"errors"
	"os"
	"testing"

	"github.com/agora-dev/agora/internal/compute"
)

// A bubblewrap warmer runs only slots its own provider started: another provider's slot of
// the same shape, or a slot of another kind, is refused (ErrSlotShape: the dispatch starts
// cold) and discarded, nothing of the spec run in it.
func TestWarmer_RefusesForeignSlots(t *testing.T) {
	requireSlots(t)
	o := slotOpts(t)
	mine, other := newProvider(t, Options{}), newProvider(t, Options{})
	wm, err := mine.Warmer(o)
	if err != nil {
		t.Fatal(err)
	}
	spec := compute.Spec{ID: "f", Argv: []string{"true"}, Env: []string{"PATH=/usr/bin:/bin"}}
	slot := newSlot(t, other, spec, o)
	if wm.Shape(spec) != slot.Shape() {
		t.Fatal("the shapes differ: the attack needs them equal")
	}
	if h, err := wm.Run(t.Context(), slot, spec, nil); !errors.Is(err, compute.ErrSlotShape) {
		if err == nil {
			h.Wait()
		}
		t.Fatalf("run of another provider's slot: %v, want ErrSlotShape", err)
	}
	if _, err := os.Stat(slot.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused slot's directory remains: %v", err)
	}
	f := &foreignSlot{}
	if _, err := wm.Run(t.Context(), f, spec, nil); !errors.Is(err, compute.ErrSlotShape) {
		t.Fatalf("run of a slot of another kind: %v, want ErrSlotShape", err)
	}
	if f.discarded != 1 {
		t.Errorf("the foreign slot was discarded %d times, want once", f.discarded)
	}
}

type foreignSlot struct{ discarded int }

func (f *foreignSlot) Shape() string { return "" }
func (f *foreignSlot) Alive() bool   { return f.discarded == 0 }
func (f *foreignSlot) Discard()      { f.discarded++ }
