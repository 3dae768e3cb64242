package mcpserver_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/mcpserver"
)

// waitingOrch has one run whose task waits for an answer.
type waitingOrch struct{ fakeOrchestrator }

func (waitingOrch) Status(context.Context, string) (json.RawMessage, error) {
	return json.RawMessage(`{"id":"run-1","state":"running","tasks":[{"id":"pick","state":"needs_input","question":"Which color?","dispatch_id":"` + resID + `"},{"id":"other","state":"running"}]}`), nil
}

func (waitingOrch) Watch(ctx context.Context, id string, _ time.Duration) (json.RawMessage, error) {
	return waitingOrch{}.Status(ctx, id)
}

// agora_orchestrator_status shows a waiting task's question with the options its dispatch
// offered.
func TestOrchestratorStatus_QuestionAndOptions(t *testing.T) {
	f := newFixture()
	f.orch = &waitingOrch{}
	r := record(resID, "needs_input")
	r.NeedsInput = &mcpserver.NeedsInput{Question: "Which color?", Options: []string{"red", "blue"}}
	f.disp.get = func(context.Context, string) (*mcpserver.Record, error) { return r, nil }
	cs := f.stdio(t, mcpserver.Principal{Client: "tester", Ceiling: mcpserver.CeilingRead}, mcpserver.Limits{})
	var out struct {
		Run struct {
			Tasks []struct {
				ID       string   `json:"id"`
				Question string   `json:"question"`
				Options  []string `json:"options"`
			} `json:"tasks"`
		} `json:"run"`
	}
	decode(t, call(t, cs, "agora_orchestrator_status", map[string]any{"run_id": "run-1"}), &out)
	if len(out.Run.Tasks) != 2 || out.Run.Tasks[0].Question != "Which color?" || len(out.Run.Tasks[0].Options) != 2 || out.Run.Tasks[1].Options != nil {
		t.Errorf("status tasks = %+v", out.Run.Tasks)
	}
}
