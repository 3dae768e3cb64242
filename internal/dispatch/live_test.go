package dispatch_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// TestSupervise_Phases: Supervise reports the host-side phases in order as they begin, and
// another reader (orch watch, a detached run's terminal) sees the phase and the worker's last
// output line in the stage while the worker runs.
func TestSupervise_Phases(t *testing.T) {
	e := newEnv(t)
	e.subagent("slow", `printf 'first\n\n  second line  \n\n'; sleep 3`)
	r, err := e.d.Accept(t.Context(), dispatch.Request{Subagent: "slow", Timeout: 30 * time.Second, Actor: "test"})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var kinds []string
	seen := make(chan dispatch.Live, 1)
	progress := func(kind string, _ *dispatch.Record) {
		mu.Lock()
		kinds = append(kinds, kind)
		mu.Unlock()
		if kind != dispatch.PhaseAgent {
			return
		}
		go func() { // the worker prints at once, then sleeps
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				if l := e.d.Live(r.ID); l.LastLine != "" {
					seen <- l
					return
				}
			}
			seen <- e.d.Live(r.ID)
		}()
	}
	final, err := e.d.Supervise(t.Context(), r.ID, progress)
	if err != nil {
		t.Fatal(err)
	}
	if final.State != lifecycle.DispatchFinished {
		t.Fatalf("dispatch %s %s: %s", final.State, final.Reason, final.Detail)
	}
	want := []string{dispatch.PhaseStaging, dispatch.PhaseSandbox, lifecycle.DispatchStarted, dispatch.PhaseAgent, dispatch.PhaseCapture, lifecycle.DispatchFinished}
	if !slices.Equal(kinds, want) {
		t.Errorf("progress kinds %v, want %v", kinds, want)
	}
	l := <-seen
	if l.Phase != dispatch.PhaseAgent || l.LastLine != "second line" || l.PhaseSince.IsZero() {
		t.Errorf("while the worker ran: %+v, want phase agent, last line %q", l, "second line")
	}
	if l := e.d.Live(r.ID); l.Phase != "" || l.LastLine != "second line" {
		t.Errorf("after the end: %+v, want no phase (the stage keeps its logs only) and the last line", l)
	}
}
