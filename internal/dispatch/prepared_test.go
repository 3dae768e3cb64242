package dispatch_test

import (
	"fmt"
	"testing"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// TestRecords_PreparedReadsSeeEveryWrite: the record reads run through statements prepared
// once. A prepared statement left un-reset would pin its connection's snapshot;
// each read must see the write committed just before it, whichever pooled connection made
// it, and a read inside a transaction (finish's) that transaction's own write.
func TestRecords_PreparedReadsSeeEveryWrite(t *testing.T) {
	e := newEnv(t)
	noopSubagent(t, e)
	ctx := t.Context()
	r, err := e.d.Accept(ctx, dispatch.Request{Subagent: "noop", Actor: "test"})
	if err != nil {
		t.Fatal(err)
	}
	db := e.home.DB.SQL()
	for i := range 20 {
		want := fmt.Sprintf("callback-%d", i)
		if _, err := db.ExecContext(ctx, `UPDATE dispatches SET callback_url = ? WHERE id = ?`, want, r.ID); err != nil {
			t.Fatal(err)
		}
		got, err := e.d.Records.Get(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.CallbackURL != want {
			t.Fatalf("read %d: callback %q, want %q (a stale snapshot)", i, got.CallbackURL, want)
		}
	}
	// Finish reads the record inside its own transaction, after its update.
	if ok, err := e.d.Records.Finish(ctx, r.ID, dispatch.Outcome{State: lifecycle.DispatchFailed, Reason: lifecycle.ReasonDenied, Detail: "test"}); err != nil || !ok {
		t.Fatalf("finish: %v %v", ok, err)
	}
	got, err := e.d.Records.Get(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != lifecycle.DispatchFailed || got.Detail != "test" || len(got.Events) < 2 {
		t.Fatalf("after finish: %s %q with %d events, want failed \"test\" and its event", got.State, got.Detail, len(got.Events))
	}
}
