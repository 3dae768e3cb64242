package local

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestRedTeam36_SlotDiesWhileStartRecorded attacks the window 15c70c1 widened: the held
// sandbox dies (the OOM killer, a kill from outside) after the claim's liveness check, while
// the dispatch's started transaction commits in beforeRelease (up to the store's busy
// timeout). It broke: the claim released the dead slot and handed back a handle whose exit
// (signal killed) the dispatch recorded as its agent's. Now the slot is looked at again
// before its release: the claim fails (the dispatch, on record as started, fails with that
// reason, not "killed") and nothing of the claim runs.
func TestRedTeam36_SlotDiesWhileStartRecorded(t *testing.T) {
	requireSlots(t)
	p := newProvider(t, Options{})
	for name, prestart := range map[string]bool{"held": false, "prestarted": true} {
		t.Run(name, func(t *testing.T) {
			slot, spec, out := outSlot(t, p, prestart, true)
			h, err := p.StartInSlotWith(t.Context(), slot, spec, func(string) error {
				pid := slot.h.pid
				if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				for deadline := time.Now().Add(10 * time.Second); !heldExited(pid); time.Sleep(time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatal("the killed held sandbox did not exit")
					}
				}
				return nil // the start committed
			})
			if err == nil {
				exit, werr := h.Wait()
				t.Fatalf("a claim of a slot that died before its release returned a handle (exit %+v, %v): its dispatch would end with an exit its agent never had", exit, werr)
			}
			t.Logf("StartInSlotWith: %v", err)
			if b, err := os.ReadFile(filepath.Join(out, "y")); err == nil {
				t.Errorf("the command of a dead slot's claim ran: %q", b)
			}
		})
	}
}
