package dispatch_test

import (
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/dispatch"
)

// TestRedTeam28_CancelledBetweenAcceptAndStart: a cancel requested after the accept and before
// the supervisor starts the sandbox (the CLI's run and a server accept and supervise in one
// process, and no longer claim in between) is honoured: the agent never runs, the dispatch
// ends cancelled, and its audit holds no dispatch.started.
func TestRedTeam28_CancelledBetweenAcceptAndStart(t *testing.T) {
	e := newEnv(t)
	e.subagent("mark", "echo ran")
	r, err := e.d.Accept(t.Context(), dispatch.Request{Subagent: "mark", Actor: "test", Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.d.Records.RequestCancel(t.Context(), r.ID); err != nil {
		t.Fatal(err)
	}
	got, err := e.d.Supervise(t.Context(), r.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, a := range e.audited(r, "dispatch.*") {
		kinds = append(kinds, a.Kind)
	}
	t.Logf("%s (%s: %s) audit %v", got.State, got.Reason, got.Detail, kinds)
	if got.State != dispatch.StateCancelled {
		t.Errorf("state %s (%s: %s), want cancelled", got.State, got.Reason, got.Detail)
	}
	for _, k := range kinds {
		if k == entry.DispatchStarted || k == entry.DispatchFinished {
			t.Errorf("audit %v: a cancelled dispatch was started", kinds)
		}
	}
	if got.Result != nil && got.Result.Stdout != nil && got.Result.Stdout.Size > 0 {
		t.Errorf("the agent ran (stdout %d bytes) although its dispatch was cancelled before it started", got.Result.Stdout.Size)
	}
}
