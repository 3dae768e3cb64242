package web_test

import (
	"testing"

	"github.com/agora-dev/agora/internal/lifecycle"
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
		if msg.Run != nil && lifecycle.RunEnded(msg.Run.State) {
			break
		}
	}
	cellsMatch(t, e, b, page, "after the run ended")
	rows := b.must(map[string]any{"op": "cells", "selector": "table#tasks tr[data-task]"}).Rows
	for _, r := range rows {
		if r.Cells[1].Text != lifecycle.TaskSucceeded {
			t.Errorf("task %s shows %q once the run succeeded", r.Task, r.Cells[1].Text)
		}
	}
}

// objectMembers is a plan whose task ids are members every JavaScript object inherits
// (constructor) or looks like one (hasownproperty, valueof: lowercase, so valid ids), which a
// plan from any MCP client may name.
const objectMembers = `version: 1
name: members
tasks:
  - {id: constructor, subagent: slow}
  - {id: valueof, subagent: slow, depends_on: [constructor]}
  - {id: after, subagent: slow, depends_on: [valueof]}
`

// TestRedTeam44D_UI_TaskNamedLikeAnObjectMember drives the real binary's run view in headless
// Chromium on a run whose first task is named "constructor": its graph node shows each state
// the stream says, every row comes to equal a fresh render, the run's state and counts go
// live, and no script error is raised. Failed before: app.js kept the drawn nodes and the
// states it heard in plain objects, so drawn["constructor"] was Object itself: the node was
// drawn with the class "st-function Object() { [native code] }", and setting a state on it
// threw, which ended each snapshot before its rows, the run's state and counts were put in
// place (the page never went live).
func TestRedTeam44D_UI_TaskNamedLikeAnObjectMember(t *testing.T) {
	requireUI(t)
	e := newUIEnv(t)
	b := newBrowser(t, e.base)
	b.login(uiOperatorToken)
	run := e.submit("members", objectMembers)
	events := watch(t, e, run.ID)
	page := "/runs/" + run.ID
	b.must(map[string]any{"op": "goto", "path": page})
	if a := b.do(map[string]any{"op": "waitSelector", "selector": "#run[data-live]", "timeout": 10000}); !a.OK {
		t.Errorf("the page never went live: %s", a.Error)
	}
	for msg := range events {
		if msg.Run != nil && lifecycle.RunEnded(msg.Run.State) {
			break
		}
	}
	cellsMatch(t, e, b, page, "after the run ended")
	for _, task := range []string{"constructor", "valueof", "after"} {
		sel := `svg#dag g.node[data-task="` + task + `"]`
		if a := b.do(map[string]any{"op": "waitClass", "selector": sel, "cls": "st-succeeded", "timeout": 10000}); !a.OK {
			cls := b.do(map[string]any{"op": "attr", "selector": sel, "name": "class"}).Text
			t.Errorf("the graph node of %s is %q once it succeeded: %s", task, cls, a.Error)
		}
	}
	if a := b.do(map[string]any{"op": "waitText", "selector": "#run-state", "contains": lifecycle.RunSucceeded, "timeout": 10000}); !a.OK {
		t.Errorf("the run's state never showed succeeded: %s", a.Error)
	}
	if rep := b.must(map[string]any{"op": "report"}); len(rep.Console) > 0 {
		t.Errorf("console errors: %q", rep.Console)
	}
}
