package local

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/agora-dev/agora/internal/compute"
)

// TestSlot_BeforeReleaseRunsFirst: StartInSlotWith's beforeRelease (where a dispatch records
// its start) sees the slot's task id while nothing of the claim has run, on a slot
// that runs its command at claim and on one prestarted at fill; the command runs once it
// returns nil.
func TestSlot_BeforeReleaseRunsFirst(t *testing.T) {
	requireSlots(t)
	p := newProvider(t, Options{})
	for name, prestart := range map[string]bool{"held": false, "prestarted": true} {
		t.Run(name, func(t *testing.T) {
			slot, spec, out := outSlot(t, p, prestart, false)
			var seen string
			h, err := p.StartInSlotWith(t.Context(), slot, spec, func(taskID string) error {
				seen = taskID
				if _, err := os.Stat(filepath.Join(out, "y")); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("the claim's command ran before beforeRelease returned: %v", err)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if exit, err := h.Wait(); err != nil || exit.Code != 0 {
				t.Fatalf("exit %+v, %v", exit, err)
			}
			if seen != h.TaskID() {
				t.Errorf("beforeRelease saw task %q, the handle is %q", seen, h.TaskID())
			}
			if b, _ := os.ReadFile(filepath.Join(out, "y")); string(b) != "ran\n" {
				t.Errorf("the command did not run after beforeRelease: %q", b)
			}
		})
	}
}

// TestSlot_BeforeReleaseRefusedRunsNothing: when beforeRelease fails (the dispatch could not
// be recorded started), the slot is killed before its gate closes (a held bwrap reads EOF
// on --block-fd as a release): the command never runs, its error is returned, the slot's
// directory is gone and the slot is never claimed again.
func TestSlot_BeforeReleaseRefusedRunsNothing(t *testing.T) {
	requireSlots(t)
	p := newProvider(t, Options{})
	for name, prestart := range map[string]bool{"held": false, "prestarted": true} {
		t.Run(name, func(t *testing.T) {
			// A command that runs on EOF too: only the kill keeps it from running.
			slot, spec, out := outSlot(t, p, prestart, true)
			refused := errors.New("not recorded")
			h, err := p.StartInSlotWith(t.Context(), slot, spec, func(string) error { return refused })
			if !errors.Is(err, refused) || h != nil {
				t.Fatalf("StartInSlotWith = %v, %v; want the refusal", h, err)
			}
			if b, err := os.ReadFile(filepath.Join(out, "y")); err == nil {
				t.Errorf("the command of a refused claim ran: %q", b)
			}
			if _, err := os.Stat(slot.Dir()); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the refused slot's directory remains: %v", err)
			}
			if _, err := p.StartInSlot(t.Context(), slot, spec); !errors.Is(err, ErrSlotClaimed) {
				t.Errorf("a second claim: %v, want ErrSlotClaimed", err)
			}
		})
	}
}

// outSlot is a slot whose command writes "ran" into /agora/out/y, and the spec of a dispatch
// "d1" that claims it with out as that directory. A prestarted slot's command waits for its
// claim pipe; onEOF makes it run on the pipe's EOF too (only a kill then keeps it from running).
func outSlot(t *testing.T, p *Provider, prestart, onEOF bool) (*Slot, compute.Spec, string) {
	t.Helper()
	o := slotOpts(t)
	tmpl := compute.Spec{ID: "tmpl", Argv: []string{"sh", "-c", "echo ran > /agora/out/y"},
		Env: []string{"PATH=/usr/bin:/bin"}, Binds: []compute.Bind{{Src: "/nonexistent-at-fill", Dst: "/agora/out", Writable: true}}}
	if prestart {
		o.PrestartEnv = "CLAIM_FD"
		sep := "&&"
		if onEOF {
			sep = ";"
		}
		tmpl.Argv = []string{"sh", "-c", "head -c1 <&$CLAIM_FD >/dev/null " + sep + " echo ran > /agora/out/y"}
	}
	slot := newSlot(t, p, tmpl, o)
	out := t.TempDir()
	spec := tmpl
	spec.ID, spec.Binds = "d1", []compute.Bind{{Src: out, Dst: "/agora/out", Writable: true}}
	return slot, spec, out
}
