package dispatch

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/modelgw"
	"github.com/agora-dev/agora/internal/store"
)

// awaitOnClock starts the approver of a live dispatch on a real agora.db inside the caller's
// synctest bubble, holding one write_file call with a 30 s approval timeout. The channel
// yields its decision and when, on the bubble's clock, Await returned.
func awaitOnClock(t *testing.T, ctx context.Context) (*Records, string, <-chan awaited) {
	t.Helper()
	db, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "agora.db"), append(append([]store.Migration{}, audit.Migrations...), Migrations...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s := NewRecords(db, audit.New(nil), nil)
	r := &Record{ID: NewID(time.Now()), Subagent: "s", SubagentDigest: "sha256:00", Envs: []EnvRef{}, Target: "local", Sandbox: "bwrap",
		Network: "none", InputDigest: "sha256:00", Timeout: Duration(time.Hour), Actor: "test"}
	if err := s.Accept(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	w := &approvalWaiter{records: s, id: r.ID, role: "s@sha256:00", timeout: 30 * time.Second}
	out := make(chan awaited, 1)
	go func() {
		d, err := w.Await(ctx, modelgw.ApprovalRequest{CallID: "call_1", Tool: "write_file", Rule: "write_file",
			ArgsDigest: "sha256:" + strings.Repeat("a", 64), Preview: `{"path":"a.txt"}`, Args: `{"path":"a.txt"}`})
		out <- awaited{d, err, time.Now()}
	}()
	synctest.Wait() // the call is pending
	return s, r.ID, out
}

type awaited struct {
	d   modelgw.ApprovalDecision
	err error
	at  time.Time
}

// next is what out yields within a minute of the bubble's clock (the approval timeout is 30
// s): an approver that never answers fails the test instead of looking for ever.
func next(t *testing.T, out <-chan awaited) awaited {
	t.Helper()
	select {
	case got := <-out:
		return got
	case <-time.After(time.Minute):
		t.Fatal("the approver had not answered a minute on")
		return awaited{}
	}
}

// TestApprovalWaiter_OnTheClock runs a held call's approver on a fake clock: a person's
// decision, made from another process through agora.db, is read back at the approver's next
// look (within approvalPoll of it, not before it); with no decision the call expires at the
// approval timeout, not a moment before, recorded as the system's expiry; a dispatch that
// stops waiting expires it then.
func TestApprovalWaiter_OnTheClock(t *testing.T) {
	t.Run("decided", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s, id, out := awaitOnClock(t, t.Context())
			time.Sleep(1050 * time.Millisecond)
			decided := time.Now()
			if _, err := s.DecideApproval(context.Background(), id, "call_1", true, "", "alice", ""); err != nil {
				t.Fatal(err)
			}
			got := next(t, out)
			if got.err != nil || got.d.State != ApprovalApproved || got.d.Actor != "alice" {
				t.Fatalf("Await = %+v, %v; want approved by alice", got.d, got.err)
			}
			if after := got.at.Sub(decided); after <= 0 || after > approvalPoll {
				t.Errorf("the decision was read back %s after it was made, want within one look (%s)", after, approvalPoll)
			}
		})
	})
	t.Run("expires", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			s, id, out := awaitOnClock(t, t.Context())
			time.Sleep(30*time.Second - time.Nanosecond)
			synctest.Wait()
			select {
			case got := <-out:
				t.Fatalf("Await returned %+v after %s, before the 30s approval timeout", got.d, got.at.Sub(start))
			default:
			}
			got := next(t, out)
			if got.err != nil || got.d.State != ApprovalExpired || got.d.Actor != SystemActor || got.d.Reason != "no decision within the approval timeout (30s)" {
				t.Fatalf("Await = %+v, %v; want expired by the system at the timeout", got.d, got.err)
			}
			if at := got.at.Sub(start); at != 30*time.Second {
				t.Errorf("expired after %s, want at the 30s timeout", at)
			}
			a, err := s.Approval(context.Background(), id, 1)
			if err != nil || a.State != ApprovalExpired || a.DecidedAt == nil || !a.DecidedAt.Equal(start.Add(30*time.Second)) {
				t.Errorf("the recorded approval: %+v, %v; want expired at the timeout", a, err)
			}
		})
	})
	t.Run("stopped", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			_, _, out := awaitOnClock(t, ctx)
			time.Sleep(5 * time.Second)
			cancel()
			got := next(t, out)
			if got.err != nil || got.d.State != ApprovalExpired || !strings.Contains(got.d.Reason, "stopped waiting") {
				t.Fatalf("Await = %+v, %v; want expired as the dispatch stopped waiting", got.d, got.err)
			}
		})
	})
}
