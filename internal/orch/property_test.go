package orch_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch"
)

// propertyChecks is how many random cases TestEngine_Properties tries in `go test` (make
// test, CI): each is an engine on a real SQLite file, about a second under -race on a loaded
// machine, and rapid's 100 cost 108 s in CI. 20 still find a lock taken twice or a task fired
// before its dependency (checked by planting each). The full rig is `make property`
// (-rapid.checks=1000); an explicit -rapid.checks or RAPID_CHECKS always wins.
const propertyChecks = 20

// sizeProperties sets rapid's number of checks to propertyChecks for t, unless the command
// line or the environment chose one.
func sizeProperties(t *testing.T) {
	chosen := os.Getenv("RAPID_CHECKS") != ""
	flag.Visit(func(f *flag.Flag) { chosen = chosen || f.Name == "rapid.checks" })
	f := flag.Lookup("rapid.checks")
	if chosen || f == nil {
		return
	}
	was := f.Value.String()
	if err := f.Value.Set(strconv.Itoa(propertyChecks)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Value.Set(was) })
}

// TestEngine_Properties runs random DAGs with random locks and random attempt outcomes, in
// several concurrent runs sharing the lock names, and checks the scheduler's invariants.
func TestEngine_Properties(t *testing.T) {
	sizeProperties(t)
	rapid.Check(t, func(rt *rapid.T) {
		nRuns := rapid.IntRange(1, 3).Draw(rt, "runs")
		lockNames := []string{"l0", "l1", "l2", "l3"}
		type info struct {
			deps  []string
			locks map[string]bool // name -> shared
		}
		tasks := map[string]map[string]info{} // run name -> task -> info
		var plans []*planDraw
		for ri := range nRuns {
			name := fmt.Sprintf("run%d", ri)
			n := rapid.IntRange(1, 14).Draw(rt, name+"-tasks")
			var specs []spec
			infos := map[string]info{}
			for i := range n {
				id := fmt.Sprintf("t%d", i)
				s := spec{ID: id, Retry: map[string]any{"max_attempts": rapid.IntRange(1, 3).Draw(rt, name+id+"-retries"), "initial_backoff": "1ms", "max_backoff": "3ms"}}
				in := info{locks: map[string]bool{}}
				for j := range i {
					if rapid.IntRange(0, 3).Draw(rt, fmt.Sprintf("%s%s-dep%d", name, id, j)) == 0 {
						s.Deps = append(s.Deps, fmt.Sprintf("t%d", j))
					}
				}
				for _, l := range lockNames {
					switch rapid.IntRange(0, 5).Draw(rt, name+id+l) {
					case 0:
						s.Locks = append(s.Locks, l)
						in.locks[l] = false
					case 1:
						s.Locks = append(s.Locks, map[string]any{"name": l, "mode": "shared"})
						in.locks[l] = true
					}
				}
				in.deps = s.Deps
				infos[id] = in
				specs = append(specs, s)
			}
			tasks[name] = infos
			plans = append(plans, &planDraw{name: name, concurrency: rapid.IntRange(1, 4).Draw(rt, name+"-conc"), specs: specs})
		}
		outcomes := rapid.SliceOfN(rapid.IntRange(0, 9), 64, 64).Draw(rt, "outcomes")

		var mu sync.Mutex
		succeeded := map[string]bool{}
		next := 0
		f := newFakeExec(nil)
		f.decide = func(a orch.Attempt) orch.Outcome {
			mu.Lock()
			k := outcomes[next%len(outcomes)]
			next++
			mu.Unlock()
			time.Sleep(time.Duration(k%3) * time.Millisecond)
			var o orch.Outcome
			switch {
			case k <= 5:
				o = orch.Outcome{State: lifecycle.TaskSucceeded}
			case k <= 7:
				o = orch.Outcome{State: lifecycle.TaskFailed, Reason: "provider-failed"}
			default:
				o = orch.Outcome{State: lifecycle.TaskFailed, Reason: "denied"}
			}
			if o.State == lifecycle.TaskSucceeded {
				mu.Lock()
				succeeded[a.RunName+"/"+a.TaskID] = true
				mu.Unlock()
			}
			return o
		}
		f.check = func(a orch.Attempt, live map[string]orch.Attempt) string {
			in := tasks[a.RunName][a.TaskID]
			mu.Lock()
			for _, d := range in.deps {
				if !succeeded[a.RunName+"/"+d] {
					mu.Unlock()
					return fmt.Sprintf("%s/%s fired before its dependency %s succeeded", a.RunName, a.TaskID, d)
				}
			}
			mu.Unlock()
			for _, o := range live {
				other := tasks[o.RunName][o.TaskID]
				for l, shared := range in.locks {
					oshared, ok := other.locks[l]
					if ok && !(shared && oshared) {
						return fmt.Sprintf("%s/%s took lock %s (shared=%v) while %s/%s held it (shared=%v)",
							a.RunName, a.TaskID, l, shared, o.RunName, o.TaskID, oshared)
					}
				}
			}
			return ""
		}
		h := start(t, filepath.Join(t.TempDir(), fmt.Sprintf("p%d.db", time.Now().UnixNano())), f)
		defer h.stop()
		ids := map[string]string{}
		for _, p := range plans {
			ids[p.name] = h.submit(mkPlan(t, p.name, p.concurrency, p.specs...))
		}
		for name, id := range ids {
			r := h.wait(id)
			states := taskStates(r)
			for tid, st := range states {
				if !lifecycle.TaskEnded(st) {
					rt.Fatalf("%s/%s ended %s, not terminal", name, tid, st)
				}
				ancestorFailed := false
				allDepsSucceeded := true
				for _, d := range tasks[name][tid].deps {
					if states[d] == lifecycle.TaskFailed || states[d] == lifecycle.TaskSkipped {
						ancestorFailed = true
					}
					if states[d] != lifecycle.TaskSucceeded {
						allDepsSucceeded = false
					}
				}
				if ancestorFailed != (st == lifecycle.TaskSkipped) {
					rt.Fatalf("%s/%s is %s; an ancestor failed: %v", name, tid, st, ancestorFailed)
				}
				if st == lifecycle.TaskSucceeded && !allDepsSucceeded {
					rt.Fatalf("%s/%s succeeded before its dependencies", name, tid)
				}
			}
		}
		if p := f.problems(); len(p) > 0 {
			rt.Fatalf("invariants broken: %v", p)
		}
		s, err := h.eng.Stats(context.Background())
		if err != nil {
			rt.Fatal(err)
		}
		if s.LocksHeld != 0 || s.LiveAttempts != 0 || s.LockWaiters != 0 || s.SlotWaiters != 0 || s.Backoffs != 0 {
			rt.Fatalf("engine not idle at the end: %+v", s)
		}
	})
}

type planDraw struct {
	name        string
	concurrency int
	specs       []spec
}
