package dispatch_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// TestRedTeam43_ReapSparesADispatchClaimedMeanwhile: Reap decides from the live records it
// listed, then records each end (audit before effect) and releases the stage. A dispatch
// accepted by a supervisor that died is taken over by a new one (detach.Watch spawns it,
// Records.Claim lets it in because the recorded supervisor is gone) while a Reap of the same
// home, in serve or any command that reads records, works through its list. Finish checked
// only that the record was live: the reap recorded failed/lost a dispatch a live supervisor
// now held (its end on record, audited, the plan retrying it), then removed that supervisor's
// staged workspace under it. The end Reap records must be the one it decided: the record's
// supervisor still the dead one it saw.
func TestRedTeam43_ReapSparesADispatchClaimedMeanwhile(t *testing.T) {
	e := newEnv(t)
	e.subagent("long", "sleep 1000")
	ctx := t.Context()
	const n = 60
	ids := make([]string, n)
	for i := range ids {
		r, err := e.d.Accept(ctx, dispatch.Request{Subagent: "long", Actor: "test", Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = r.ID
		// Accepted by a supervisor that is gone (pid 2^22+1 is never allocated).
		if _, err := e.home.DB.SQL().ExecContext(ctx, `UPDATE dispatches SET supervisor = '4194305:1' WHERE id = ?`, r.ID); err != nil {
			t.Fatal(err)
		}
		// What the new supervisor stages once it holds the dispatch.
		ws := filepath.Join(e.d.StateDir, r.ID, wire.WorkspaceDir)
		if err := os.MkdirAll(ws, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, "work"), []byte("the new supervisor's"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	reaped := make(chan error, 1)
	go func() {
		_, err := e.d.Reap(context.WithoutCancel(ctx))
		reaped <- err
	}()
	// Once Reap has listed the live records (it has ended one), take the others over from
	// the end of its list, as a new supervisor does.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Microsecond) {
		var ended int
		if err := e.home.DB.SQL().QueryRowContext(ctx, `SELECT count(*) FROM dispatches WHERE state = ?`, dispatch.StateFailed).Scan(&ended); err != nil {
			t.Fatal(err)
		}
		if ended > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Reap ended no dispatch")
		}
	}
	var claimed []string
	for i := n - 1; i >= 0; i-- {
		err := e.d.Records.Claim(ctx, ids[i])
		switch {
		case err == nil:
			claimed = append(claimed, ids[i])
		case !errors.Is(err, dispatch.ErrClaimed):
			t.Fatal(err)
		}
	}
	if err := <-reaped; err != nil {
		t.Fatal(err)
	}
	if len(claimed) == 0 {
		t.Skip("SKIP: Reap ended every dispatch before one was taken over: the race was not run")
	}
	t.Logf("%d of %d dispatches taken over while Reap ran", len(claimed), n)
	for _, id := range claimed {
		if t.Failed() {
			break // one is enough to read
		}
		r, err := e.d.Records.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if r.State != dispatch.StateAccepted {
			t.Errorf("dispatch %s, taken over by a live supervisor, was recorded %s/%s by Reap: %s", id, r.State, r.Reason, r.Detail)
		}
		if _, err := os.Stat(filepath.Join(e.d.StateDir, id, wire.WorkspaceDir, "work")); err != nil {
			t.Errorf("dispatch %s, taken over by a live supervisor: Reap removed its staged workspace: %v", id, err)
		}
	}
}
