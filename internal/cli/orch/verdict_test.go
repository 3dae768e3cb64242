package orch

import (
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/verdict"
)

// TestTaskVerdict: orch status's VERIFY column says a task's gate in a word or two, as
// dispatch describe's verify lines say it in full: none, pending, passed, or failed with its reason.
func TestTaskVerdict(t *testing.T) {
	spec := &verdict.Spec{Command: []string{"go", "test", "./..."}, Timeout: verdict.DefaultTimeout, Protect: []string{"**/*_test.go"}}
	red := verdict.Red(verdict.ReasonExit, "exit status 1", 1, spec.Command, 1500*time.Millisecond,
		verdict.TailText{Text: "--- FAIL: TestAdd\x1b[31m\nFAIL\n", Total: 28})
	green := verdict.Green(spec.Command, time.Second, verdict.TailText{Text: "ok\n", Total: 3})
	for _, tt := range []struct {
		name string
		task api.Task
		want string
	}{
		{"red", api.Task{Verify: spec, Verdict: &red}, "failed: exit-status"},
		{"green", api.Task{Verify: spec, Verdict: &green}, "passed"},
		{"pending", api.Task{Verify: spec}, "pending"},
		{"no gate", api.Task{}, "-"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := taskVerdict(tt.task); got != tt.want {
				t.Errorf("VERIFY column %q, want %q", got, tt.want)
			}
		})
	}
}
