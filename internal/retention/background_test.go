package retention_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/retention"
)

// TestBackground_SweepsAsSystemAndStops: serve's sweep purges at start as actor system, role
// retention-sweep, and returns when its context ends; with no policy it never purges.
func TestBackground_SweepsAsSystemAndStops(t *testing.T) {
	h := newHome(t)
	h.insert(t, disp{id: "old", state: "finished", ended: ago(100), patch: h.put(t, []byte("p"), longAgo)})
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var results []retention.Result
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.sweeper(policy).Background(ctx, time.Hour, func(_ *retention.Plan, res retention.Result, err error) {
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			results = append(results, res)
			mu.Unlock()
			cancel()
		})
	}()
	<-done
	if len(results) != 1 || results[0].Recorded != 2 {
		t.Fatalf("results %+v: want one sweep of 2 products", results)
	}
	recs, err := audit.List(context.Background(), h.db.SQL(), audit.ListOptions{Kind: "retention.purged"})
	if err != nil || len(recs) != 1 || recs[0].Actor != "system" || recs[0].Details["role"] != "retention-sweep" {
		t.Fatalf("entries %+v, %v", recs, err)
	}
	// No policy: Background returns at once, having purged nothing.
	h.insert(t, disp{id: "old2", state: "finished", ended: ago(100), patch: h.put(t, []byte("p2"), longAgo)})
	h.sweeper(config.RetentionPolicy{}).Background(context.Background(), time.Hour, func(*retention.Plan, retention.Result, error) {
		t.Error("a sweep ran with no retention set")
	})
	if n := count(t, h.db.SQL(), `SELECT count(*) FROM retention_purged WHERE dispatch_id = 'old2'`); n != 0 {
		t.Fatalf("%d products of old2 purged with no policy", n)
	}
}
