package orch_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/verdict"
)

// TestRedTeam27_SandboxFilesDecodedExactly: what a reviewer or a fan-out producer leaves is
// the agent's, so the host reads it exactly. Keys spelled with escapes, Unicode case folds
// (ſ folds to s in encoding/json), keys twice and an item id equal to another item's index
// are refused; an id that only looks like "id" after folding ("ıd") is no id.
func TestRedTeam27_SandboxFilesDecodedExactly(t *testing.T) {
	for _, c := range []struct{ doc, want string }{
		{`{"approve":true,"reaſons":["x"]}`, "unknown field"},
		{`{"approve":false,"reasons":[],"reaſons":["x"]}`, "duplicate key"},
		{`{"approve":true,"appro\u0076e":false}`, "duplicate key"},
		{`{"approve":true,"reasons":["a"],"reasons":["b"]}`, "duplicate key"},
		{`{"approve":null}`, `"approve" is required`},
		{`{"approve":"true"}`, "read review"},
		{`{"approve":true} {"approve":false}`, "read review"},
	} {
		if v, err := orch.DecodeReview([]byte(c.doc)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("review %s: %+v, %v; want an error with %q", c.doc, v, err, c.want)
		}
	}
	if v, err := orch.DecodeReview([]byte(`{"\u0061pprove":true}`)); err != nil || !v.Approve {
		t.Errorf(`an escaped spelling of "approve" alone is that key: %+v, %v`, v, err)
	}
	for _, c := range []struct{ doc, want string }{
		{`[{"id":"a"},{"\u0069d":"a"}]`, "same key"},
		{`[{"id":"a","i\u0064":"b"}]`, "duplicate key"},
		{`[{"id":"1"}, 1]`, "same key"},
		{`[{"id":"a.fix-1"}]`, "cannot name a task"},
		{`[{"id":"a].review-r1"}]`, "cannot name a task"},
		{`[{"id":"x/../y"}]`, "cannot name a task"},
		{`[{"id":"A"}]`, "cannot name a task"},
		{`[{"id":"é"}]`, "cannot name a task"},
		{`[{"id":"` + strings.Repeat("a", 64) + `"}]`, "cannot name a task"},
		{`[{"id":"a"}][]`, "not one exact JSON document"},
		{`{"items":[1]}`, "want a JSON list"},
	} {
		if v, err := orch.DecodeItems([]byte(c.doc)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("items %s: %+v, %v; want an error with %q", c.doc, v, err, c.want)
		}
	}
	items, err := orch.DecodeItems([]byte(`[{"ıd":"zz"}, {"id":"01"}, 1]`))
	if err != nil || len(items) != 3 || items[0].Key != "0" || items[1].Key != "01" || items[2].Key != "2" {
		t.Errorf("items: %+v, %v; want keys 0, 01, 2", items, err)
	}
}

// TestRedTeam27_RejectionRecordedBeforeItsFix: a task's own work judged red (by its verify
// gate or by its reviewers) is the decision; the fix it adds is the effect. The audit says
// so in that order: orch.task.rejected (naming the red dispatch) before the orch.run.extended
// entry that adds the fix, as a fix's own rejection is recorded before the next fix.
func TestRedTeam27_RejectionRecordedBeforeItsFix(t *testing.T) {
	red := verdict.Red(verdict.ReasonExit, "exit status 1", 1, []string{"go", "test", "./..."}, time.Second, verdict.TailText{Text: "FAIL\n", Total: 5})
	green := verdict.Green([]string{"go", "test", "./..."}, time.Second, verdict.TailText{Text: "ok\n", Total: 3})
	for _, c := range []struct {
		name, plan string
		exec       func(a orch.Attempt) orch.Outcome
	}{
		{"verify gate", verifyLoopPlan, func(a orch.Attempt) orch.Outcome {
			if a.TaskID == "t" {
				return orch.Outcome{State: lifecycle.TaskFailed, Reason: lifecycle.ReasonVerifyFailed, Detail: "verify: exit status 1", Verdict: &red}
			}
			if a.TaskID == "t.fix-1" {
				return orch.Outcome{State: lifecycle.TaskSucceeded, Verdict: &green}
			}
			return orch.Outcome{State: lifecycle.TaskSucceeded}
		}},
		{"review", `version: 1
name: rev
tasks:
  - id: t
    subagent: coder
    review: {subagents: [r1], approve: 1}
    on_fail: {fix: {subagent: fixer}}
`, func(a orch.Attempt) orch.Outcome {
			switch a.TaskID {
			case "t.review-r1":
				return orch.Outcome{State: lifecycle.TaskSucceeded, Review: &orch.Review{Reasons: []string{"no test"}}}
			case "t.fix-1.review-r1":
				return orch.Outcome{State: lifecycle.TaskSucceeded, Review: &orch.Review{Approve: true, Reasons: []string{}}}
			}
			return orch.Outcome{State: lifecycle.TaskSucceeded}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := start(t, "", newFakeExec(c.exec))
			id := h.runToEnd(parsePlan(t, c.plan))
			if r := h.wait(id); r.State != lifecycle.RunSucceeded {
				t.Fatalf("run %s: %v", r.State, taskStates(r))
			}
			rej := auditAbout(t, h, "run/"+id+"/task/t", "orch.task.rejected")
			ext := auditAbout(t, h, "run/"+id+"/task/t", "orch.run.extended")
			var fix []uint64
			for _, x := range ext {
				if x.Details["cause"] == "fix" {
					fix = append(fix, x.Seq)
				}
			}
			if len(rej) != 1 || len(fix) != 1 {
				t.Fatalf("%d rejected and %d fix extension entries for t, want 1 and 1", len(rej), len(fix))
			}
			if rej[0].Seq > fix[0] {
				t.Errorf("orch.task.rejected (%d) is recorded after the orch.run.extended entry (%d) adding the fix it caused", rej[0].Seq, fix[0])
			}
		})
	}
}
