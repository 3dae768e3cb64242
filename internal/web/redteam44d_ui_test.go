package web_test

import (
	"testing"

	"github.com/agora-dev/agora/internal/orch/api"
)

const twoSlow = `version: 1
name: twoslow
tasks:
  - {id: first, subagent: slow}
  - {id: second, subagent: slow, depends_on: [first]}
`

// TestRedTeam44D_UI_StreamRefusedIsOpenedAgain drives the real binary's run view in headless
// Chromium with the page's event stream answered 503 twice (as the reads gate answers when it
// has no turn for 10 s, or a proxy in front of the server while it restarts): the page opens
// the stream again, and its rows come to equal a fresh render once the run has ended.
// Failed before: EventSource gives up for good on an answer that is not a stream, so the page
// never went live and kept its first rows (first running, second pending) while the server
// said both had succeeded.
func TestRedTeam44D_UI_StreamRefusedIsOpenedAgain(t *testing.T) {
	requireUI(t)
	e := newUIEnv(t)
	b := newBrowser(t, e.base)
	b.login(uiOperatorToken)
	run := e.submit("twoslow", twoSlow)
	events := watch(t, e, run.ID)
	stream := "/api/runs/" + run.ID + "/events"
	b.must(map[string]any{"op": "failNext", "path": stream, "status": 503, "times": 2})
	page := "/runs/" + run.ID
	b.must(map[string]any{"op": "goto", "path": page})
	if a := b.do(map[string]any{"op": "waitSelector", "selector": "#run[data-live]", "timeout": 20000}); !a.OK {
		t.Errorf("the page never went live after its stream was refused: %s", a.Error)
	}
	if n := b.must(map[string]any{"op": "failed", "path": stream}).N; n != 2 {
		t.Errorf("%d stream requests were refused, want 2 (the page asked again after each)", n)
	}
	for msg := range events {
		if msg.Run != nil && api.RunTerminal(msg.Run.State) {
			break
		}
	}
	cellsMatch(t, e, b, page, "after the run ended")
	rows := b.must(map[string]any{"op": "cells", "selector": "table#tasks tr[data-task]"}).Rows
	for _, r := range rows {
		if r.Cells[1].Text != api.TaskSucceeded {
			t.Errorf("task %s shows %q once the run succeeded", r.Task, r.Cells[1].Text)
		}
	}
}
