package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/api"
)

// wideRun is a run of n tasks in layers of 30 (each depending on the task above it), so its
// graph is taller than any view.
func wideRun(n int) *fakeOrch {
	var tasks []api.Task
	for i := range n {
		t := api.Task{ID: fmt.Sprintf("t%d", i), State: lifecycle.TaskPending, Subagent: "coder"}
		if i >= 30 {
			t.DependsOn = []string{fmt.Sprintf("t%d", i-30)}
		}
		if i%7 == 0 {
			t.State = lifecycle.TaskSucceeded
		}
		tasks = append(tasks, t)
	}
	return newFakeOrch(tasks...)
}

// TestServer_GraphByViewport: the graph endpoint answers only the nodes and edges a
// rectangle meets, with their current states, and the run page carries no graph at all:
// the page asks for what it shows as it scrolls.
func TestServer_GraphByViewport(t *testing.T) {
	o := wideRun(3000)
	e := startWith(t, Sources{Orch: o, Dispatches: fakeDispatches{map[string]*dispatch.Record{}}})
	var g graphView
	for deadline := time.Now().Add(10 * time.Second); ; {
		req, _ := http.NewRequest("GET", e.base+"/api/runs/run1/graph?x0=0&y0=0&x1=1400&y1=900", nil)
		req.Header.Set("Authorization", "Bearer "+readToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == http.StatusServiceUnavailable && time.Now().Before(deadline) {
			resp.Body.Close()
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("graph: status %d", resp.StatusCode)
		}
		err = json.NewDecoder(resp.Body).Decode(&g)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		break
	}
	if g.Total != 3000 || g.H < 100*(nodeH+gapY) {
		t.Errorf("graph of %d nodes, %dx%d, want 3000 nodes 100 layers tall", g.Total, g.W, g.H)
	}
	if len(g.Nodes) == 0 || len(g.Nodes) > 300 {
		t.Fatalf("%d nodes in a 1400x900 view, want those in view only", len(g.Nodes))
	}
	states := map[string]string{}
	for _, n := range g.Nodes {
		if n.Y > 900 || n.X > 1400 {
			t.Errorf("node %s at %d,%d is outside the view", n.ID, n.X, n.Y)
		}
		states[n.ID] = n.State
	}
	if states["t0"] != lifecycle.TaskSucceeded || states["t1"] != lifecycle.TaskPending {
		t.Errorf("states t0 %q, t1 %q; want succeeded, pending", states["t0"], states["t1"])
	}
	if len(g.Deps) == 0 || len(g.Deps)%4 != 0 {
		t.Errorf("edges %v, want coordinates in fours", g.Deps)
	}
	body := fetch(t, e, readToken, "/runs/run1")
	if len(body) > 100_000 || strings.Contains(body, "t2999") {
		t.Errorf("the run page of 3,000 tasks is %d bytes or lists the last task: it must list one page", len(body))
	}
	if !strings.Contains(body, `href="/runs/run1?from=100" id="tasks-next"`) {
		t.Error("the run page has no link to its next tasks")
	}
	if next := fetch(t, e, readToken, "/runs/run1?from=2900"); !strings.Contains(next, `data-task="t2999"`) || strings.Contains(next, `data-task="t2899"`) {
		t.Error("?from=2900 does not list the last hundred tasks")
	}
}

// countingRuns counts how many reads of the runs are under way at once.
type countingRuns struct {
	*orch.Reader
	now, most atomic.Int32
}

func (c *countingRuns) Run(ctx context.Context, ref string) (api.Run, error) {
	n := c.now.Add(1)
	defer c.now.Add(-1)
	for {
		m := c.most.Load()
		if n <= m || c.most.CompareAndSwap(m, n) {
			break
		}
	}
	time.Sleep(5 * time.Millisecond) // a read that takes a while
	return c.Reader.Run(ctx, ref)
}

var _ Runs = (*countingRuns)(nil)

// TestServer_ReadsAreGated: however many pages load at once, at most maxReads of them read
// the databases at a time; the rest wait their turn (16 of one token are within its
// maxClientWaiting, so every one is answered: fetch fails on anything but 200).
func TestServer_ReadsAreGated(t *testing.T) {
	o := wideRun(50)
	runs := &countingRuns{Reader: o.store(t)}
	e := startWith(t, Sources{Orch: o, Runs: runs, Dispatches: fakeDispatches{map[string]*dispatch.Record{}}})
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path := []string{"/runs/run1", "/api/runs/run1", "/runs/run1/tasks/t3"}[i%3]
			fetch(t, e, readToken, path)
		}()
	}
	wg.Wait()
	if m := runs.most.Load(); m == 0 || m > maxReads {
		t.Errorf("%d reads at once, want at most %d", m, maxReads)
	}
}
