package dispatch_test

import (
	"testing"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// TestSuperviseAccepted: supervising the record Accept returned runs the dispatch as
// Supervise does, records the binaries the sandbox runs, and still finds a cancel asked for
// after the accept (before the sandbox exists: no sandbox starts, no binary is recorded);
// a record that ended meanwhile is not run again.
func TestSuperviseAccepted(t *testing.T) {
	e := newEnv(t)
	noopSubagent(t, e)
	ctx := t.Context()
	accept := func(t *testing.T) *dispatch.Record {
		r, err := e.d.Accept(ctx, dispatch.Request{Subagent: "noop", Actor: "test"})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	t.Run("runs", func(t *testing.T) {
		got, err := e.d.SuperviseAccepted(ctx, accept(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != lifecycle.DispatchFinished || got.ProviderTaskID == "" {
			t.Fatalf("state %s (%s: %s), task %q; want finished in a sandbox", got.State, got.Reason, got.Detail, got.ProviderTaskID)
		}
		if got.WorkerBinary == nil || got.WorkerBinary.SHA256 == "" {
			t.Errorf("the worker binary the sandbox ran is not on record: %+v", got.WorkerBinary)
		}
	})
	t.Run("cancelled after the accept", func(t *testing.T) {
		r := accept(t)
		if _, err := e.d.Records.RequestCancel(ctx, r.ID); err != nil {
			t.Fatal(err)
		}
		got, err := e.d.SuperviseAccepted(ctx, r, nil) // r still says accepted, not cancelled
		if err != nil {
			t.Fatal(err)
		}
		if got.State != lifecycle.DispatchCancelled || got.ProviderTaskID != "" {
			t.Fatalf("state %s (%s: %s), task %q; want cancelled before any sandbox", got.State, got.Reason, got.Detail, got.ProviderTaskID)
		}
		if got.WorkerBinary != nil {
			t.Errorf("a binary recorded for a sandbox that never started: %+v", got.WorkerBinary)
		}
	})
	t.Run("ended meanwhile", func(t *testing.T) {
		r := accept(t)
		if _, err := e.d.Records.Finish(ctx, r.ID, dispatch.Outcome{State: lifecycle.DispatchFailed, Reason: lifecycle.ReasonProviderFailed, Detail: "ended elsewhere"}); err != nil {
			t.Fatal(err)
		}
		got, err := e.d.SuperviseAccepted(ctx, r, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != lifecycle.DispatchFailed || got.Detail != "ended elsewhere" || got.ProviderTaskID != "" {
			t.Fatalf("state %s (%s: %s), task %q; want the end recorded elsewhere, nothing run", got.State, got.Reason, got.Detail, got.ProviderTaskID)
		}
	})
}
