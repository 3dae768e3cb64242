package orch

import (
	"fmt"
	"strings"

	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/api"
)

// nextStep is what must happen for run r to move on when only a person can move it: each task
// in needs_input waits for `agora orch answer RUN TASK --answer TEXT` on the host (no MCP tool
// answers a run's question, and a lead that watches again is answered at once). "" when no
// task waits for an answer, or the run is being cancelled.
func nextStep(r api.Run) string {
	if r.CancelAsked || lifecycle.RunEnded(r.State) {
		return ""
	}
	var cmds, tasks []string
	for _, t := range r.Tasks {
		if t.State == lifecycle.TaskNeedsInput {
			cmds = append(cmds, "`"+api.AnswerCommand(r.ID, t.ID)+"`")
			tasks = append(tasks, t.ID)
		}
	}
	if len(cmds) == 0 {
		return ""
	}
	who := "task " + tasks[0] + " asks a question"
	if len(tasks) > 1 {
		who = "tasks " + strings.Join(tasks, ", ") + " ask questions"
	}
	msg := fmt.Sprintf("%s only a person can answer: a person must run %s on the host (no MCP tool answers a run's question)",
		who, strings.Join(cmds, " and "))
	if r.State == lifecycle.RunNeedsInput {
		msg = fmt.Sprintf("run %s waits for a person: %s; until then nothing in it moves and watching it returns at once", r.ID, msg)
	}
	return msg
}
