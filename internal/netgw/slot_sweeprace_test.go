package netgw

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// TestSlots_SweepNeverRevokesASlotBeingMade: serve sweeps the slot store before
// each standby start while other standbys make their slots. A sweep that saw a slot's
// directory before its maker had locked the hold counted the holder gone and removed it:
// the maker's Create failed, or made a slot whose directory was gone. Holders sweeping while
// others create: every Create succeeds and every slot made stands while it is held.
func TestSlots_SweepNeverRevokesASlotBeingMade(t *testing.T) {
	s := &Slots{Dir: filepath.Join(t.TempDir(), "slots")}
	stop := make(chan struct{})
	var sweepers sync.WaitGroup
	for range 2 {
		sweepers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := s.Sweep(t.Context()); err != nil {
					t.Errorf("sweep: %v", err)
					return
				}
			}
		})
	}
	var made []*Slot
	for i := 0; i < 300 && !t.Failed(); i++ {
		sl, err := s.Create(t.Context())
		if err != nil {
			t.Errorf("create %d while others sweep: %v", i, err)
			break
		}
		made = append(made, sl)
	}
	close(stop)
	sweepers.Wait()
	for _, sl := range made {
		if _, err := os.Stat(filepath.Join(s.Dir, sl.ID, slotFile)); err != nil {
			t.Errorf("held slot %s was swept: %v", sl.ID, err)
		}
		sl.Close()
	}
}
