package web

import (
	"net/http"
	"slices"
	"testing"

	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/api"
)

// TestServer_RetryFailedRetriesEachFailedTask: the run page's "Retry failed tasks" retries
// every failed task, one engine retry each (the engine refuses a retry that names no task,
// so the button did nothing but answer 409), and leaves the others alone.
func TestServer_RetryFailedRetriesEachFailedTask(t *testing.T) {
	o := newFakeOrch(
		api.Task{ID: "a", State: lifecycle.TaskFailed, Subagent: "coder"},
		api.Task{ID: "b", State: lifecycle.TaskSucceeded, Subagent: "coder"},
		api.Task{ID: "c", State: lifecycle.TaskFailed, Subagent: "coder"},
	)
	e := startWith(t, Sources{Orch: o, Dispatches: fakeDispatches{}})
	req, _ := http.NewRequest("POST", e.base+"/runs/run1/retry", nil)
	req.Header.Set("Authorization", "Bearer "+opToken)
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("retry: status %d", resp.StatusCode)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	var tasks []string
	for _, a := range o.actions {
		tasks = append(tasks, a.Task)
	}
	slices.Sort(tasks)
	if !slices.Equal(tasks, []string{"a", "c"}) {
		t.Errorf("retried tasks %q, want exactly the failed ones, a and c", tasks)
	}
}
