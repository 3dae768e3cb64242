package web

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/compute/warm"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/api"
)

// The runs page lists the queues with their running tasks and depth; a scheduled run's page
// (its id NAME@SLOT in the path) names its queue, schedule, slot and missed slots.
func TestQueuesAndScheduledRun(t *testing.T) {
	o := newFakeOrch(api.Task{ID: "a", State: lifecycle.TaskReady, Subagent: "coder"})
	slot := time.Date(2026, 11, 24, 1, 0, 0, 0, time.UTC)
	o.run.ID, o.run.Queue, o.run.Schedule, o.run.Slot, o.run.Missed = "nightly@2026-11-24T01:00:00Z", "nightly", "nightly", &slot, 2
	queues := []api.Queue{
		{Name: "default", Concurrency: 16, Declared: true},
		{Name: "nightly", Concurrency: 2, Declared: true, Running: 2, Depth: 5, Runs: 3},
		{Name: "old", Concurrency: 1, Running: 1, Runs: 1},
	}
	e := startWith(t, Sources{Orch: o, Dispatches: fakeDispatches{}, Queues: func(context.Context) ([]api.Queue, error) { return queues, nil }})
	runs := fetch(t, e, readToken, "/runs")
	for _, want := range []string{`<tr data-queue="nightly"><td>nightly</td><td>2</td><td>2</td><td>5</td><td>3</td></tr>`,
		`<tr data-queue="old"><td>old</td><td>1 <span class="tag">not declared in agora.yaml</span></td>`} {
		if !strings.Contains(runs, want) {
			t.Errorf("runs page lacks %s", want)
		}
	}
	page := fetch(t, e, readToken, "/runs/nightly@2026-11-24T01:00:00Z")
	for _, want := range []string{`<dd id="run-queue">nightly: 2 running of 2, depth 5</dd>`,
		`<dd id="run-schedule">nightly, slot 2026-11-24T01:00:00Z, missed: 2 earlier slots coalesced into this run</dd>`} {
		if !strings.Contains(page, want) {
			t.Errorf("run page lacks %s", want)
		}
	}
}

// The runs page shows a line per warm target: ready of wanted, claimed, cold
// fallbacks and failures, as serve's standbys count them at the request.
func TestRunsPage_WarmSlots(t *testing.T) {
	o := newFakeOrch(api.Task{ID: "a", State: lifecycle.TaskReady, Subagent: "coder"})
	counts := []warm.Counts{{Target: "local", Want: 4, Ready: 3, Claimed: 7, Cold: 2, Failed: 1}}
	e := startWith(t, Sources{Orch: o, Dispatches: fakeDispatches{}, Warm: func() []warm.Counts { return counts }})
	want := `<tr data-target="local"><td>local</td><td>3/4</td><td>7</td><td>2</td><td>1</td></tr>`
	if runs := fetch(t, e, readToken, "/runs"); !strings.Contains(runs, want) {
		t.Errorf("runs page lacks %s", want)
	}
	counts[0].Ready = 0
	if runs := fetch(t, e, readToken, "/runs"); !strings.Contains(runs, `<td>0/4</td>`) {
		t.Error("runs page does not follow the counts")
	}
	e2 := startWith(t, Sources{Orch: o, Dispatches: fakeDispatches{}})
	if runs := fetch(t, e2, readToken, "/runs"); strings.Contains(runs, `id="warm"`) {
		t.Error("a serve holding no warm slots shows a warm table")
	}
}
