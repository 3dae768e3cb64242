package slots

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// A slot runs one claim. A second Run of a slot whose first claim is under way MUST be
// refused without touching it: discarding it there killed the first claim's container,
// revoked its token and removed its read-only places under it.
func TestWarmer_SecondRunLeavesTheFirstClaim(t *testing.T) {
	home, err := os.MkdirTemp("", "agwt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	w := openWarmer(t, slotTestProvider(t, home))
	// The slot's command never claims: the first Run waits in its Bind (slotBindWait).
	tmpl := compute.Spec{Argv: []string{"/bin/sh", "-c", "sleep 600"}, Env: []string{"PATH=/usr/bin:/bin"},
		Binds: []compute.Bind{{Src: slotWorker(t), Dst: wire.BinPath}},
		RunAs: &compute.HostUser{UID: 0x70008000 + 4243, GID: 0x70008000 + 4243}}
	slot, err := w.Fill(t.Context(), tmpl)
	if err != nil {
		t.Fatalf("fill: %v", err)
	}
	sl := slot.(*Slot)
	first := tmpl
	first.ID = "01FIRSTCLAIM"
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		h, err := w.Run(ctx, slot, first, nil)
		if err == nil {
			h.Wait()
		}
		done <- err
	}()
	agoratest.WaitFor(t, 5*time.Second, "the first claim to hold the slot's claim mark", func() bool { return w.g.claimHeld(sl.gw.ID) })
	second := tmpl
	second.ID = "01SECONDCLAIM"
	if h, err := w.Run(t.Context(), slot, second, nil); err == nil {
		h.Wait()
		t.Fatal("a second claim ran in a slot already claimed")
	}
	if !slot.Alive() {
		t.Error("the refused second claim killed the first claim's slot container")
	}
	if sl.files != nil {
		if _, err := os.Lstat(sl.files.dir); err != nil {
			t.Errorf("the refused second claim removed the first claim's places: %v", err)
		}
	}
	<-done
}
