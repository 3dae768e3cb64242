package orch_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch"
)

// TestOutcome_TextNotUTF8: an attempt's detail and question can carry bytes that are not
// UTF-8 (a file name in a provider's error, a sandbox's question). The engine records them
// with each run of bad bytes replaced by U+FFFD and goes on: the failed task is retried and
// the question is asked.
func TestOutcome_TextNotUTF8(t *testing.T) {
	const bad = "open /work/\xff\xfe.txt: no such file" // one run of two bad bytes
	exec := newFakeExec(func(a orch.Attempt) orch.Outcome {
		switch {
		case a.TaskID == "flaky" && a.Number == 1:
			return orch.Outcome{State: lifecycle.TaskFailed, Reason: lifecycle.ReasonWorkerFailed, Detail: bad}
		case a.TaskID == "asks":
			return orch.Outcome{State: lifecycle.TaskNeedsInput, Question: "which \xff one?"}
		}
		return orch.Outcome{State: lifecycle.TaskSucceeded}
	})
	h := startWith(t, filepath.Join(t.TempDir(), "orch.db"), exec, orch.Options{})
	id := h.submit(mkPlan(t, "bytes", 2, spec{ID: "flaky", Retry: map[string]any{"max_attempts": 2, "initial_backoff": "1ms"}}, spec{ID: "asks"}))
	r := h.wait(id, lifecycle.RunNeedsInput)
	for _, task := range r.Tasks {
		switch task.ID {
		case "flaky":
			if task.State != lifecycle.TaskSucceeded || task.Attempts != 2 {
				t.Errorf("flaky: %s after %d attempts", task.State, task.Attempts)
			}
		case "asks":
			if task.State != lifecycle.TaskNeedsInput || task.Question != "which \uFFFD one?" {
				t.Errorf("asks: %s, question %q", task.State, task.Question)
			}
		}
	}
	found := false
	for _, e := range taskEntries(t, h, id, "flaky") {
		if d, _ := e.Details["detail"].(string); strings.Contains(d, "open /work/\uFFFD.txt") {
			found = true
		}
	}
	if !found {
		t.Errorf("no entry of flaky holds the detail with its bad bytes replaced")
	}
}
