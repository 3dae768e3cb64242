package web

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/api"
)

// TestServer_LearnShown: a learn dispatch is marked learn on the dispatches page and its
// own page; another dispatch is not. Failed before: the pages had no such mark.
func TestServer_LearnShown(t *testing.T) {
	now := time.Now()
	recs := map[string]*dispatch.Record{
		"d1": {ID: "d1", State: lifecycle.DispatchFinished, Subagent: "learner", CreatedAt: now, EndedAt: &now, Learn: true},
		"d2": {ID: "d2", State: lifecycle.DispatchFinished, Subagent: "plain", CreatedAt: now, EndedAt: &now},
	}
	e := startWith(t, Sources{Orch: newFakeOrch(), Dispatches: fakeDispatches{recs}})
	c, _ := login(t, e, readToken)
	get := func(path string) string {
		resp, err := c.Get(e.base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
		return string(b)
	}
	if b := get("/dispatches/d1"); !strings.Contains(b, `id="d-learn"`) {
		t.Errorf("the learn dispatch's page does not say learn")
	}
	if b := get("/dispatches/d2"); strings.Contains(b, `id="d-learn"`) {
		t.Errorf("a dispatch that is not a learn one is marked learn")
	}
	if b := get("/dispatches"); strings.Count(b, `<span class="learn">(learn)</span>`) != 1 {
		t.Errorf("the dispatches page marks %d dispatches learn, want 1", strings.Count(b, `<span class="learn">(learn)</span>`))
	}
}

// TestServer_TargetLearnTaskMarked: a plain task on a target a person put in
// mode: learn runs as a learn dispatch; the run page badges it (learn) and its task page says
// why, like a plan's learn: true task, while a plain task's row and page say nothing. A learn
// dispatch of another run marks nothing here. Failed before: the run page badged only a
// plan's learn tasks ("the web run page marks only plan-learn tasks").
func TestServer_TargetLearnTaskMarked(t *testing.T) {
	now := time.Now()
	recs := map[string]*dispatch.Record{
		"d1": {ID: "d1", State: lifecycle.DispatchFinished, Subagent: "coder", CreatedAt: now, EndedAt: &now, Learn: true, RunID: "run1", TaskID: "bytarget"},
		"d2": {ID: "d2", State: lifecycle.DispatchFinished, Subagent: "coder", CreatedAt: now, EndedAt: &now, RunID: "run1", TaskID: "plain"},
		"d3": {ID: "d3", State: lifecycle.DispatchFinished, Subagent: "coder", CreatedAt: now, EndedAt: &now, Learn: true, RunID: "other", TaskID: "x"},
	}
	o := newFakeOrch(
		api.Task{ID: "bytarget", State: lifecycle.TaskSucceeded, Subagent: "coder", DispatchID: "d1", Dispatches: []string{"d1"}},
		api.Task{ID: "plain", State: lifecycle.TaskSucceeded, Subagent: "coder", DispatchID: "d2", Dispatches: []string{"d2"}},
		api.Task{ID: "elsewhere", State: lifecycle.TaskSucceeded, Subagent: "coder", DispatchID: "d3x", Dispatches: []string{"d3x"}},
	)
	e := startWith(t, Sources{Orch: o, Dispatches: fakeDispatches{recs}})
	c, _ := login(t, e, readToken)
	get := func(path string) string {
		resp, err := c.Get(e.base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
		return string(b)
	}
	page := get("/runs/run1")
	for _, task := range []string{"bytarget", "plain", "elsewhere"} {
		i := strings.Index(page, `<tr data-task="`+task+`">`)
		if i < 0 {
			t.Fatalf("the run page has no row for %s:\n%s", task, page)
		}
		row, _, _ := strings.Cut(page[i:], "</tr>")
		if marked := strings.Contains(row, `<span class="learn"`); marked != (task == "bytarget") {
			t.Errorf("task %s marked learn=%v on the run page: %s", task, marked, row)
		}
	}
	if b := get("/runs/run1/tasks/bytarget"); !strings.Contains(b, `id="t-learn"`) || !strings.Contains(b, "its target is in mode: learn") {
		t.Errorf("the target-learn task's page does not say learn")
	}
	if b := get("/runs/run1/tasks/plain"); strings.Contains(b, `id="t-learn"`) {
		t.Errorf("a plain task's page is marked learn")
	}
}
