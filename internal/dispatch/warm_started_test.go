package dispatch_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// TestWarm_StartRecordedBeforeRelease: a bubblewrap slot's claim records the dispatch started,
// with the binaries its sandbox runs, in one transaction before it releases the slot
// (SetBinaries takes no transaction of its own there). The warm record
// names the same worker binary as a cold one, its start is recorded before the agent's
// first act, and the audit holds one accepted, one started and one end entry; a dispatch
// that misfits the slot and starts cold is recorded the same way, its start once the
// sandbox runs.
func TestWarm_StartRecordedBeforeRelease(t *testing.T) {
	e, w := warmEnv(t, 1)
	e.subagent("clock", `date +%s%N`)
	cold := e.run(dispatch.Request{Subagent: "clock"})
	if cold.State != lifecycle.DispatchFinished || cold.WorkerBinary == nil {
		t.Fatalf("cold: %s %s %s, worker %+v", cold.State, cold.Reason, cold.Detail, cold.WorkerBinary)
	}
	waitWarmReady(t, w, 1)
	hot := e.run(dispatch.Request{Subagent: "clock"})
	if hot.State != lifecycle.DispatchFinished {
		t.Fatalf("warm: %s %s %s", hot.State, hot.Reason, hot.Detail)
	}
	if c := warmCounts(w); c.Claimed != 1 || c.Cold != 0 {
		t.Fatalf("the second dispatch did not run warm: %+v", c)
	}
	waitWarmReady(t, w, 1)
	misfit := e.run(dispatch.Request{Subagent: "clock", Timeout: 31 * time.Second})
	if misfit.State != lifecycle.DispatchFinished {
		t.Fatalf("misfit: %s %s %s", misfit.State, misfit.Reason, misfit.Detail)
	}
	if c := warmCounts(w); c.Cold != 1 {
		t.Fatalf("the misfit did not start cold: %+v", c)
	}
	recs, err := audit.List(t.Context(), e.home.DB.SQL(), audit.ListOptions{Kind: "dispatch.*"})
	if err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]*dispatch.Record{"warm": hot, "misfit": misfit} {
		again, err := e.d.Records.Get(t.Context(), r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if again.WorkerBinary == nil || *again.WorkerBinary != *cold.WorkerBinary {
			t.Errorf("%s: stored worker binary %+v, the cold dispatch's %+v", name, again.WorkerBinary, cold.WorkerBinary)
		}
		ns, err := strconv.ParseInt(strings.TrimSpace(e.stdout(again)), 10, 64)
		if err != nil || again.StartedAt == nil {
			t.Fatalf("%s: stdout %q (%v), started %v", name, e.stdout(again), err, again.StartedAt)
		}
		// A slot's claim commits the start before it releases the sandbox, so the agent's
		// first act comes after it. A cold start is recorded once the provider started the
		// sandbox, whose agent may already have run: it lies between accept and end.
		if ran := time.Unix(0, ns); name == "warm" && again.StartedAt.After(ran) {
			t.Errorf("%s: recorded started at %s, after the agent ran at %s", name, again.StartedAt.Format(time.RFC3339Nano), ran.Format(time.RFC3339Nano))
		}
		if again.StartedAt.Before(again.CreatedAt) || again.EndedAt == nil || again.StartedAt.After(*again.EndedAt) {
			t.Errorf("%s: recorded started at %s, not between its accept at %s and its end at %v", name, again.StartedAt.Format(time.RFC3339Nano), again.CreatedAt.Format(time.RFC3339Nano), again.EndedAt)
		}
		n := map[string]int{}
		for _, a := range recs {
			if a.Subject == entry.Dispatch(r.ID) {
				n[a.Kind]++
			}
		}
		if n[entry.DispatchAccepted] != 1 || n[entry.DispatchStarted] != 1 || n[entry.DispatchState(lifecycle.DispatchFinished)] != 1 || len(n) != 3 {
			t.Errorf("%s: audit entries %v, want one accepted, started and finished", name, n)
		}
	}
}
