package lease

import (
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/lease/fencefile"
)

// TestFence_Publish: the file mirrors the fence: open once published after a renew, moved
// with every renew, shut with it, and never reopened by a renew racing the Shut.
func TestFence_Publish(t *testing.T) {
	f := NewFence("agora/leader", 2*time.Second)
	f.renewed(bootNow())
	w, err := fencefile.Create(filepath.Join(t.TempDir(), "leader.fence"), f.Valid())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Check(); err == nil {
		t.Fatal("a file not yet published is open")
	}
	f.Publish(w)
	if err := w.Check(); err != nil {
		t.Fatalf("published after a renew: %v", err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 1000 {
				f.renewed(bootNow())
			}
		})
	}
	f.Shut()
	wg.Wait()
	if err := w.Check(); err == nil {
		t.Error("the file is open after the fence was shut")
	}
	if err := f.Check(); err == nil {
		t.Error("the fence is open after Shut")
	}

	// Published when already shut: shut.
	g := NewFence("agora/leader", 2*time.Second)
	g.renewed(bootNow())
	g.Shut()
	w2, err := fencefile.Create(filepath.Join(t.TempDir(), "leader.fence"), g.Valid())
	if err != nil {
		t.Fatal(err)
	}
	g.Publish(w2)
	w2.Advance(int64(bootNow()) + int64(time.Second))
	if err := w2.Check(); err == nil {
		t.Error("a file published by a shut fence opens")
	}
}
