package dispatch_test

import (
	"context"
	"testing"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// cancelledOnAdopt is an outliving provider whose task is cancelled while serve adopts it:
// someone's `dispatch cancel` lands after the adopter claimed the dispatch and before it
// found the task, which the cancel deleted (Kubernetes: the Job is gone).
type cancelledOnAdopt struct {
	*outliving
	cancel func()
}

func (p *cancelledOnAdopt) Adopt(ctx context.Context, s compute.Spec) (compute.Handle, error) {
	p.cancel()
	p.mu.Lock()
	p.gone = true
	p.mu.Unlock()
	return p.outliving.Adopt(ctx, s)
}

// TestRedTeam38_AdoptedThenCancelledIsCancelled (serve's adoption, a27e27f): a
// dispatch cancelled while serve adopts it (the cancel deleted its task, so the adopter finds
// none) ends cancelled, as its own supervisor would have recorded it, not failed/lost: lost
// makes a plan run the task again, which its cancel asked not to. Failed before: lost, "its
// worker is gone".
func TestRedTeam38_AdoptedThenCancelledIsCancelled(t *testing.T) {
	e := newEnv(t)
	base := &outliving{end: make(chan struct{})}
	defer close(base.end)
	p := &cancelledOnAdopt{outliving: base}
	r := orphan(t, e, base)
	p.cancel = func() {
		if _, err := e.d.Records.RequestCancel(context.Background(), r.ID); err != nil {
			t.Error(err)
		}
	}
	host := *e.d
	host.RemoteProviders = func(context.Context, string, config.Target) (compute.Provider, error) { return p, nil }
	host.Adopt = &dispatch.Adoption{Role: "serve"}
	if _, err := host.Reap(t.Context()); err != nil {
		t.Fatal(err)
	}
	host.Adopt.Wait()
	if n := adoptedEntries(t, e, r.ID); n != 1 {
		t.Fatalf("%d dispatch.adopted entries, want 1", n)
	}
	cur, err := e.d.Records.Get(t.Context(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if cur.State != lifecycle.DispatchCancelled || cur.Reason != lifecycle.ReasonCancelled {
		t.Errorf("a dispatch cancelled while serve adopted it ended %s/%s (%s), want cancelled", cur.State, cur.Reason, cur.Detail)
	}
	// The audit tells it in order: started, adopted (before the adopter touched the task),
	// then the one end.
	rows, err := e.home.DB.SQL().Query(`SELECT kind FROM audit_entries WHERE subject = ? ORDER BY seq`, "dispatch/"+r.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var kinds []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, k)
	}
	pos := map[string]int{}
	ends := 0
	for i, k := range kinds {
		if _, ok := pos[k]; !ok {
			pos[k] = i
		}
		if k == "dispatch.cancelled" || k == "dispatch.failed" || k == "dispatch.finished" {
			ends++
		}
	}
	t.Logf("audit: %v", kinds)
	s, okS := pos["dispatch.started"]
	a, okA := pos["dispatch.adopted"]
	c, okC := pos["dispatch.cancelled"]
	if !okS || !okA || !okC || !(s < a && a < c) || ends != 1 {
		t.Errorf("the dispatch's audit entries %v: want started, adopted, then one end (cancelled)", kinds)
	}
}
