package orch_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/api"
)

// TestEngine_AcceptedTaskKeepsNoAwaitingReason: a task accepted after its review (and the fix
// that replaced it) ends succeeded with no awaiting-review or awaiting-fix reason and no
// detail, in the engine's status, in orch.db as the read-only reader sees it (orch status
// without serve, the web view), and in an engine reopened on the same file. Failed before:
// the succeeded task kept "awaiting-review" and its reviewers' names in every one of them.
func TestEngine_AcceptedTaskKeepsNoAwaitingReason(t *testing.T) {
	for name, tc := range map[string]struct {
		votes map[string]orch.Review
		fixes int
	}{
		"approved":        {votes: nil, fixes: 0},
		"fixed, approved": {votes: map[string]orch.Review{"t.review-r2": {Approve: false, Reasons: []string{"no test"}}}, fixes: 2},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "orch.db")
			h := start(t, path, newFakeExec(reviewer(tc.votes)))
			id := h.runToEnd(parsePlan(t, reviewPlan(3, tc.fixes)))
			stale := func(where string, tasks []api.Task) {
				t.Helper()
				seen := 0
				for _, task := range tasks {
					if task.State != lifecycle.TaskSucceeded {
						t.Errorf("%s: task %s %s", where, task.ID, task.State)
					}
					if task.ID == "t" || task.ID == "t.fix-1" {
						seen++
					}
					if task.Reason != "" || task.Detail != "" {
						t.Errorf("%s: succeeded task %s keeps reason %q, detail %q", where, task.ID, task.Reason, task.Detail)
					}
				}
				if seen != 1+tc.fixes/2 {
					t.Errorf("%s: saw %d of t and its fix", where, seen)
				}
			}
			r := h.wait(id)
			stale("engine", r.Tasks)
			rows, err := orch.NewReader(h.db.SQL()).Tasks(context.Background(), id, 0, 100)
			if err != nil {
				t.Fatal(err)
			}
			var read []api.Task
			for _, row := range rows {
				read = append(read, row.Task)
			}
			stale("orch.db", read)
			h.stop()
			h2 := start(t, path, newFakeExec(reviewer(nil)))
			stale("reopened", h2.wait(id).Tasks)
		})
	}
}

// TestEngine_OlderRowsAwaitNothing: a succeeded task whose row an older agora left with its
// awaiting-review reason and its reviewers in the detail reads as awaiting nothing, through
// the reader and in an engine reopened on the file. Failed before: all of them showed the
// stale reason.
func TestEngine_OlderRowsAwaitNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "orch.db")
	h := start(t, path, newFakeExec(reviewer(nil)))
	id := h.runToEnd(parsePlan(t, reviewPlan(3, 0)))
	h.wait(id)
	h.waitFolded() // the rows an older agora left are the tables' rows
	res, err := h.db.SQL().ExecContext(context.Background(),
		`UPDATE tasks SET reason = 'awaiting-review', detail = 'reviewers: t.review-r1' WHERE state = 'succeeded'`)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		t.Fatal("no succeeded task row to age")
	}
	check := func(where string, tasks []api.Task) {
		t.Helper()
		if len(tasks) == 0 {
			t.Fatalf("%s: no tasks", where)
		}
		for _, task := range tasks {
			if task.State == lifecycle.TaskSucceeded && (task.Reason != "" || task.Detail != "") {
				t.Errorf("%s: succeeded task %s reads reason %q, detail %q", where, task.ID, task.Reason, task.Detail)
			}
		}
	}
	rows, err := orch.NewReader(h.db.SQL()).Tasks(context.Background(), id, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var read []api.Task
	for _, row := range rows {
		read = append(read, row.Task)
	}
	check("reader", read)
	h.stop()
	h2 := start(t, path, newFakeExec(reviewer(nil)))
	check("reopened", h2.wait(id).Tasks)
}
