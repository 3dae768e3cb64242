package mcpserver_test

import (
	"context"
	"encoding/json"
	"strings"
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

// pathOrch has one run whose tasks' free text names host paths: a failure detail and a
// question.
type pathOrch struct{ fakeOrchestrator }

func (pathOrch) Status(context.Context, string) (json.RawMessage, error) {
	return json.RawMessage(`{"id":"run-1","state":"failed","tasks":[` +
		`{"id":"a","state":"failed","reason":"denied","detail":"repository /tmp/TestX123/001/private-repo is not a directory"},` +
		`{"id":"b","state":"needs_input","question":"overwrite /home/alice/src/app/.env?"}]}`), nil
}

func (pathOrch) Watch(ctx context.Context, id string, _ time.Duration) (json.RawMessage, error) {
	return pathOrch{}.Status(ctx, id)
}

// agora_orchestrator_status and _watch mask host paths in a task's detail and question, as
// describe does in a dispatch's.
func TestOrchestratorStatus_HostPathsMasked(t *testing.T) {
	f := newFixture()
	f.orch = &pathOrch{}
	cs := f.stdio(t, mcpserver.Principal{Client: "tester", Ceiling: mcpserver.CeilingRead}, mcpserver.Limits{})
	for _, tool := range []string{"agora_orchestrator_status", "agora_orchestrator_watch"} {
		var doc any
		if err := json.Unmarshal([]byte(text(call(t, cs, tool, map[string]any{"run_id": "run-1"}))), &doc); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(doc)
		got := strings.NewReplacer(`\u003c`, "<", `\u003e`, ">").Replace(string(b))
		for _, p := range []string{"/tmp/TestX123", "private-repo", "/home/alice"} {
			if strings.Contains(got, p) {
				t.Errorf("%s shows %q: %s", tool, p, got)
			}
		}
		if !strings.Contains(got, "repository <path> is not a directory") || !strings.Contains(got, "overwrite <path>") {
			t.Errorf("%s: the masked texts are missing: %s", tool, got)
		}
	}
}
