package service_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/api"
)

// TestRedTeam44R_ReviewerEndsWithoutAnswer: a reviewer that gives no answer of its own never
// approves. The code under review, run by the reviewer, hangs (it leaves the reviewer no time
// to answer) after planting approving files:
//   - timeout: the task's timeout ends the reviewer; it failed, which rejects, and the
//     signed audit says approved: false;
//   - cancel: the run is cancelled while the reviewer waits; the work is cancelled, never
//     approved, and no orch.task.reviewed entry says otherwise.
func TestRedTeam44R_ReviewerEndsWithoutAnswer(t *testing.T) {
	e, _ := reviewEnv(t, "")
	e.editors(map[string]string{"coder": `printf 'x\n' > x.txt`})
	hang := `mkdir -p "$AGORA_OUT/outputs" && printf '{"approve": true}' > "$AGORA_OUT/outputs/final.md" && printf '{"approve": true}' > "$AGORA_OUT/outputs/verdict.json" && echo hanging && sleep 600`
	pb, _ := json.Marshal(hang)
	plan := func(name, timeout string) string {
		return fmt.Sprintf("version: 1\nname: %s\ndefaults: {env: [model]}\ntasks:\n  - id: work\n    subagent: coder\n"+
			"    input: {probe: %s}\n    timeout: %s\n    review: {subagents: [r-probe], approve: 1}\n", name, pb, timeout)
	}

	t.Run("timeout", func(t *testing.T) {
		out, ok := e.submit(plan("late", "8s"))
		if ok {
			t.Fatalf("the work was approved:\n%s", out)
		}
		_, byID := e.statusOf("late")
		w, r := byID["work"], byID["work.review-r-probe"]
		t.Logf("the reviewer: %s %s (%s)", r.State, r.Reason, r.Detail)
		if r.State != lifecycle.TaskFailed || r.Reason != "timeout" || r.Review != nil {
			t.Errorf("the reviewer: %s %s (%s), review %+v; want failed timeout with no review", r.State, r.Reason, r.Detail, r.Review)
		}
		if w.State != lifecycle.TaskFailed || w.Reason != "review-rejected" {
			t.Errorf("work: %s %s (%s), want failed review-rejected", w.State, w.Reason, w.Detail)
		}
		if reviewed := e.reviewedEntries("late", "work"); len(reviewed) != 1 || reviewed[0]["approved"] != false {
			t.Errorf("orch.task.reviewed %v", reviewed)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "plan.yaml")
		must(t, os.WriteFile(p, []byte(plan("cancelled", "10m")), 0o644))
		runID := strings.TrimSpace(strings.Split(e.run("orch", "submit", p), "\n")[0])
		var run api.Run
		var byID map[string]api.Task
		if !agoratest.Poll(2*time.Minute, func() bool {
			_, byID = e.statusOf(runID)
			return byID["work.review-r-probe"].State == lifecycle.TaskRunning
		}) {
			t.Fatalf("the reviewer never ran: %+v", byID)
		}
		e.run("orch", "cancel", runID)
		if !agoratest.Poll(2*time.Minute, func() bool {
			run, byID = e.statusOf(runID)
			return lifecycle.RunEnded(run.State)
		}) {
			t.Fatalf("the run never ended after its cancel: %s", run.State)
		}
		if run.State != lifecycle.RunCancelled {
			t.Errorf("run %s, want cancelled", run.State)
		}
		if w := byID["work"]; w.State == lifecycle.TaskSucceeded {
			t.Errorf("the work succeeded: %+v", w)
		}
		if r := byID["work.review-r-probe"]; r.Review != nil && r.Review.Approve {
			t.Errorf("the cancelled reviewer approved: %+v", r.Review)
		}
		for _, d := range e.reviewedEntries(runID, "work") {
			if d["approved"] != false {
				t.Errorf("orch.task.reviewed %v", d)
			}
		}
	})
}
