package orch

import (
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/api"
)

// TestNextStep names each task that waits for a person with its exact answer command, says the
// run waits only when nothing else can move it, and says nothing once a cancel was asked or the
// run ended.
func TestNextStep(t *testing.T) {
	asks := func(state string, cancel bool, tasks ...api.Task) api.Run {
		return api.Run{ID: "R1", State: state, CancelAsked: cancel, Tasks: tasks}
	}
	q := func(id string) api.Task { return api.Task{ID: id, State: lifecycle.TaskNeedsInput} }
	busy := api.Task{ID: "b", State: lifecycle.TaskRunning}
	for _, tc := range []struct {
		name string
		run  api.Run
		want []string // substrings; nil wants ""
	}{
		{"one", asks(lifecycle.RunNeedsInput, false, q("a")), []string{"run R1 waits for a person: task a asks", "`agora orch answer R1 a --answer TEXT`", "watching it returns at once"}},
		{"two", asks(lifecycle.RunNeedsInput, false, q("a"), q("c")), []string{"tasks a, c ask questions", "`agora orch answer R1 a --answer TEXT` and `agora orch answer R1 c --answer TEXT`"}},
		{"others run", asks(lifecycle.RunRunning, false, q("a"), busy), []string{"task a asks a question only a person can answer"}},
		{"cancelling", asks(lifecycle.RunNeedsInput, true, q("a")), nil},
		{"ended", asks(lifecycle.RunFailed, false, q("a")), nil},
		{"nobody asks", asks(lifecycle.RunRunning, false, busy), nil},
	} {
		got := nextStep(tc.run)
		if tc.want == nil && got != "" {
			t.Errorf("%s: next = %q, want none", tc.name, got)
		}
		if tc.want == nil && got == "" {
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: next = %q, want it to hold %q", tc.name, got, w)
			}
		}
		if tc.run.State == lifecycle.RunRunning && strings.Contains(got, "waits for a person") {
			t.Errorf("%s: next = %q says the run waits while other tasks run", tc.name, got)
		}
	}
}
