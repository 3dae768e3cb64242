package dispatch_test

import (
	"errors"
	"testing"

	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/store"
)

// TestRedTeam44_OnlyTheLeaderReapsAndCancels: in a home with a leader lease, a process that
// does not lead it (`agora mcp`, a CLI read or `dispatch wait` on a standby replica's pod, a
// replica that led once) reads an agora.db that may be a stale copy: a dispatch it lists as
// live with a supervisor gone may be running under the new leader, which adopted it. Before,
// its Reap recorded such a dispatch lost and had the provider stop its task (a Job the leader
// runs), and `dispatch cancel` did the same. Now it does neither; under the leader's fence
// (the leading serve and what it starts) both work as before, and a home without a lease is
// unchanged.
func TestRedTeam44_OnlyTheLeaderReapsAndCancels(t *testing.T) {
	e, r := deadSupervised(t)
	p := &orderProvider{records: e.d.Records, id: r.ID}
	e.d.LocalProvider = p
	e.d.Config.Leader = config.Leader{Namespace: "agora", Lease: "agora-leader"}

	if n, err := e.d.Reap(t.Context()); err != nil || n != 0 {
		t.Fatalf("Reap by a process not leading the home = %d, %v; want nothing ended", n, err)
	}
	if _, err := e.d.Cancel(t.Context(), r.ID); !errors.Is(err, dispatch.ErrNotLeader) {
		t.Fatalf("Cancel by a process not leading the home: %v, want ErrNotLeader", err)
	}
	if p.state != "" {
		t.Fatal("a process not leading the home had the provider stop the dispatch's task")
	}
	if cur, err := e.d.Records.Get(t.Context(), r.ID); err != nil || cur.State != lifecycle.DispatchStarted {
		t.Fatalf("the record after a non-leader's reap and cancel: %+v, %v; want it started as it was", cur, err)
	}

	// The leader: its fence is set (open).
	restore := store.SetFence(func() error { return nil })
	defer restore()
	if n, err := e.d.Reap(t.Context()); err != nil || n != 1 {
		t.Fatalf("the leader's Reap = %d, %v; want the dead supervisor's dispatch ended", n, err)
	}
	if p.state != string(lifecycle.DispatchFailed) {
		t.Fatalf("the leader's reap stopped the task with the record %q", p.state)
	}
}
