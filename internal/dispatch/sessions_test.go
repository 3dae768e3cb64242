package dispatch_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/netgw"
)

// TestGatewaySessions_LiveDispatchesOnly: agora.db stores a gateway session only for a
// live dispatch, and the dispatch's end deletes it in the transaction that records the end,
// whoever records it: a replica restored from agora.db's replica never holds the session of a
// dispatch that ended (it would revive a token the old leader closed).
func TestGatewaySessions_LiveDispatchesOnly(t *testing.T) {
	e := newEnv(t)
	e.subagent("work", "true")
	ctx := t.Context()
	r, err := e.d.Accept(ctx, dispatch.Request{Subagent: "work", Actor: "test", Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	s := &netgw.DBSessions{DB: e.home.DB}
	sum := strings.Repeat("ab", 32)
	rec := []byte(`{"version":1,"dispatch":"` + r.ID + `","token_sha256":"` + sum + `"}`)
	if err := s.PutSession(ctx, r.ID, sum, rec); err != nil {
		t.Fatalf("store the session of an accepted dispatch: %v", err)
	}
	if err := s.PutSession(ctx, "01J0000000000000000000NONE", sum, rec); err == nil {
		t.Error("a session was stored for a dispatch agora.db never recorded")
	}
	if _, err := e.d.Records.Finish(ctx, r.ID, dispatch.Outcome{State: lifecycle.DispatchCancelled, Reason: lifecycle.ReasonCancelled, Detail: "test"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Session(ctx, r.ID); !errors.Is(err, netgw.ErrNoSession) {
		t.Errorf("the session of a dispatch that ended: %v, want none", err)
	}
	// Ended in the same transaction as its audit entry: the end and the deletion are one commit.
	var ended int
	if err := e.home.DB.SQL().QueryRowContext(context.Background(),
		`SELECT count(*) FROM audit_entries WHERE kind = 'dispatch.cancelled' AND subject = ?`, "dispatch/"+r.ID).Scan(&ended); err != nil || ended != 1 {
		t.Errorf("dispatch.cancelled entries: %d (%v)", ended, err)
	}
	if err := s.PutSession(ctx, r.ID, sum, rec); err == nil || !strings.Contains(err.Error(), "not live") {
		t.Errorf("a session stored for a dispatch that ended: %v, want refused", err)
	}
}
