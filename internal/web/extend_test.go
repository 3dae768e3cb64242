package web

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/api"
)

// addedRun is a run whose fan-out, review and fix loop added tasks: a reviewer rejected
// docs's work with a reason a model wrote, its first fix was rejected, its second succeeded.
func addedRun() *fakeOrch {
	return newFakeOrch(
		api.Task{ID: "list", State: lifecycle.TaskSucceeded, Subagent: "lister"},
		api.Task{ID: "each", State: lifecycle.TaskSucceeded, DependsOn: []string{"list"}},
		api.Task{ID: "each[pkg-1]", State: lifecycle.TaskSucceeded, Subagent: "porter", Added: &api.Added{Cause: "fan_out", Task: "each"}},
		api.Task{ID: "docs", State: lifecycle.TaskSucceeded, Subagent: "writer", DispatchID: "d1"},
		api.Task{ID: "docs.review-r1", State: lifecycle.TaskSucceeded, Subagent: "r1", Added: &api.Added{Cause: "review", Task: "docs"},
			Review: &api.Review{Approve: false, Reasons: []string{"no test <script>alert(1)</script>"}}},
		api.Task{ID: "docs.fix-1", State: lifecycle.TaskRejected, Subagent: "fixer", Added: &api.Added{Cause: "fix", Task: "docs"}},
		// docs's product is its fix that succeeded: its dispatch, d3.
		api.Task{ID: "docs.fix-2", State: lifecycle.TaskSucceeded, Subagent: "fixer", DispatchID: "d3", Added: &api.Added{Cause: "fix", Task: "docs"}},
	)
}

// TestServer_AddedTasksShown: tasks a run added are ordinary rows of the run page, reached by
// their ids (brackets and dots included); their task pages say why they were added, a
// reviewer's review (its reasons escaped) and a fixed task's product.
func TestServer_AddedTasksShown(t *testing.T) {
	o := addedRun()
	e := startWith(t, Sources{Orch: o, Dispatches: fakeDispatches{map[string]*dispatch.Record{}}})
	c, _ := login(t, e, readToken)
	// The run's shape is made first: a page waits for it only shapeWait and is otherwise drawn
	// without what follows from the plan (a fixed task's product among it); the test asserts
	// the page with it.
	if _, ok, err := e.srv.shapes.get(t.Context(), "run1", 0, time.Minute); !ok {
		t.Fatalf("the run's shape: %v", err)
	}
	for _, tc := range []struct {
		path string
		want []string
	}{
		{"/runs/run1", []string{`data-task="each[pkg-1]"`, `href="/runs/run1/tasks/each[pkg-1]"`, `<span class="state st-rejected">rejected</span>`,
			// docs succeeded with its second fix's work: its row says so, naming the fix's dispatch.
			`>fixed</span></td><td>with the work of its fix, <a href="/dispatches/d3">d3</a></td>`}},
		{"/runs/run1/tasks/each%5Bpkg-1%5D", []string{`id="t-added"`, "an item of fan-out", `href="/runs/run1/tasks/each"`}},
		{"/runs/run1/tasks/each[pkg-1]", []string{`id="t-added"`}},
		{"/runs/run1/tasks/docs.review-r1", []string{`id="t-review"`, "rejects", "no test &lt;script&gt;", "a reviewer of the work of"}},
		{"/runs/run1/tasks/docs", []string{`id="t-product"`, `href="/dispatches/d3"`}},
		{"/runs/run1/tasks/docs.fix-1", []string{`id="t-added"`, "a fix of the work of", `href="/runs/run1/tasks/docs"`, `<span class="state st-rejected">rejected</span>`}},
		{"/runs/run1/tasks/list", []string{"lister"}},
	} {
		resp, err := c.Get(e.base + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, w := range tc.want {
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), w) {
				t.Errorf("GET %s: status %d, body lacks %q", tc.path, resp.StatusCode, w)
			}
		}
		if strings.Contains(string(b), "<script>alert") {
			t.Errorf("GET %s: a reviewer's reason is not escaped", tc.path)
		}
		if tc.path == "/runs/run1/tasks/list" && strings.Contains(string(b), `id="t-added"`) {
			t.Errorf("GET %s: a task of the plan is said to be added", tc.path)
		}
	}

	// The JSON API says the same (why each task was added, docs's product, the review), and
	// the graph has a node for every task with its state.
	var run struct {
		Total int        `json:"total"`
		Tasks []api.Task `json:"tasks"`
	}
	body := getJSON(t, c, e.base+"/api/runs/run1", &run)
	if strings.Contains(body, "<script>") {
		t.Error("/api/runs/run1: a reviewer's reason is not escaped")
	}
	got := map[string]api.Task{}
	for _, task := range run.Tasks {
		got[task.ID] = task
	}
	if run.Total != 7 || len(run.Tasks) != 7 {
		t.Fatalf("/api/runs/run1: %d tasks of %d, want 7", len(run.Tasks), run.Total)
	}
	if a := got["each[pkg-1]"].Added; a == nil || *a != (api.Added{Cause: "fan_out", Task: "each"}) {
		t.Errorf("/api/runs/run1: each[pkg-1] added %+v", a)
	}
	if got["docs"].Product != "d3" || got["docs"].Added != nil || got["docs.fix-2"].Added == nil {
		t.Errorf("/api/runs/run1: docs %+v, docs.fix-2 %+v", got["docs"], got["docs.fix-2"])
	}
	if rv := got["docs.review-r1"].Review; rv == nil || rv.Approve || rv.Reasons[0] != "no test <script>alert(1)</script>" {
		t.Errorf("/api/runs/run1: docs.review-r1's review %+v", rv)
	}
	var g graphView
	getJSON(t, c, e.base+"/api/runs/run1/graph?x0=0&y0=0&x1=8000&y1=8000", &g)
	states := map[string]string{}
	for _, n := range g.Nodes {
		states[n.ID] = n.State
	}
	want := map[string]string{"list": "succeeded", "each": "succeeded", "each[pkg-1]": "succeeded", "docs": "succeeded",
		"docs.review-r1": "succeeded", "docs.fix-1": "rejected", "docs.fix-2": "succeeded"}
	for id, st := range want {
		if states[id] != st {
			t.Errorf("graph node %s: state %q, want %q (nodes %v)", id, states[id], st, states)
		}
	}
	// The reviewer and the first fix take docs's work, the second fix the first's: needs edges.
	if g.Total != 7 || len(g.Needs) < 3*4 {
		t.Errorf("graph: %d tasks, needs edges %v; want 7 tasks and 3 needs edges", g.Total, g.Needs)
	}
}

// getJSON reads url into v and returns the body.
func getJSON(t *testing.T, c *http.Client, url string, v any) string {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return string(b)
}

// AddedRunServer serves addedRun for the Chromium test (package web_test): its address and
// a read-only token.
func AddedRunServer(t *testing.T) (base, token string) {
	e := startWith(t, Sources{Orch: addedRun(), Dispatches: fakeDispatches{map[string]*dispatch.Record{}}})
	return e.base, readToken
}
