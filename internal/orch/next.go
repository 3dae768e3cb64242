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
	var waiting []string
	for _, t := range r.Tasks {
		if t.State == lifecycle.TaskNeedsInput {
			waiting = append(waiting, t.ID)
		}
	}
	return nextStepOf(r, waiting)
}

// nextStepOf is nextStep of run r whose tasks waiting (in position order) ask a question.
func nextStepOf(r api.Run, waiting []string) string {
	if r.CancelAsked || lifecycle.RunEnded(r.State) {
		return ""
	}
	var cmds []string
	for _, id := range waiting {
		cmds = append(cmds, "`"+api.AnswerCommand(r.ID, id)+"`")
	}
	if len(cmds) == 0 {
		return ""
	}
	who := "task " + waiting[0] + " asks a question"
	if len(waiting) > 1 {
		who = "tasks " + strings.Join(waiting, ", ") + " ask questions"
	}
	msg := fmt.Sprintf("%s only a person can answer: a person must run %s on the host (no MCP tool answers a run's question)",
		who, strings.Join(cmds, " and "))
	if r.State == lifecycle.RunNeedsInput {
		msg = fmt.Sprintf("run %s waits for a person: %s; until then nothing in it moves and watching it returns at once", r.ID, msg)
	}
	return msg
}
