package retention_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agora-dev/agora/internal/digest"
	"github.com/agora-dev/agora/internal/retention"
	"github.com/agora-dev/agora/internal/store"
)

// TestPurge_FenceShutMidSweep is the attack of an old leader's sweep: the process's
// fence closes (another replica took the Lease) after a batch was recorded and before its
// blobs are deleted. No blob is deleted once the fence refuses; the recorded purges stay
// pending, and a sweep under an open fence (the leader's) finishes them.
func TestPurge_FenceShutMidSweep(t *testing.T) {
	h := newHome(t)
	var ds []digest.Digest
	for i := range 3 {
		d := h.put(t, []byte{byte(i), 'f'}, longAgo)
		ds = append(ds, d)
		h.insert(t, disp{id: "d" + string(rune('a'+i)), state: "finished", ended: ago(100), patch: d})
	}
	var shut atomic.Bool
	defer store.SetFence(func() error {
		if shut.Load() {
			return errors.New("lease agora/leader: leadership ended; refusing to commit")
		}
		return nil
	})()
	retention.SetAfterRecord(func() { shut.Store(true) })
	defer retention.SetAfterRecord(nil)
	_, _, err := h.sweeper(policy).Run(context.Background(), "system", retention.RoleSweep, nil)
	if err == nil || !strings.Contains(err.Error(), "refusing to commit") {
		t.Fatalf("sweep past a shut fence: %v, want the fence's refusal", err)
	}
	for _, d := range ds {
		if !h.has(d) {
			t.Errorf("%s deleted after the fence shut", d)
		}
	}
	if n := count(t, h.db.SQL(), `SELECT count(*) FROM retention_purged WHERE done = 0`); n != 6 {
		t.Fatalf("%d pending purges, want the 6 (input and patch of 3 dispatches) recorded before the fence shut", n)
	}

	retention.SetAfterRecord(nil)
	shut.Store(false)
	if _, _, err := h.sweeper(policy).Run(context.Background(), "system", retention.RoleSweep, nil); err != nil {
		t.Fatal(err)
	}
	if n := count(t, h.db.SQL(), `SELECT count(*) FROM retention_purged WHERE done = 0`); n != 0 {
		t.Errorf("%d purges still pending after the leader's sweep, want 0", n)
	}
	for _, d := range ds {
		if h.has(d) {
			t.Errorf("%s still stored after the leader's sweep", d)
		}
	}
}
