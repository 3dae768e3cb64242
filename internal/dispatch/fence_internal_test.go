package dispatch

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/store"
)

// TestRecords_Fenced: dispatch records (accept, started, and their audit entries) pass the
// process's leader fence (store.SetFence): with it refusing, nothing is recorded.
func TestRecords_Fenced(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "agora.db"), append(append([]store.Migration{}, audit.Migrations...), Migrations...))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s := NewRecords(db, audit.New(nil), nil)
	rec := func() *Record {
		return &Record{ID: NewID(time.Now()), Subagent: "s", SubagentDigest: "sha256:00", Envs: []EnvRef{}, Target: "local", Sandbox: "bwrap",
			Network: "none", InputDigest: "sha256:00", Timeout: Duration(time.Minute), Actor: "test"}
	}
	open := rec()
	if err := s.Accept(ctx, open); err != nil {
		t.Fatal(err)
	}
	fenced := errors.New("lease agora/leader: leadership ended; refusing to commit")
	defer store.SetFence(func() error { return fenced })()
	if err := s.Accept(ctx, rec()); !errors.Is(err, fenced) {
		t.Errorf("a fenced accept: %v, want the fence's error", err)
	}
	if err := s.Started(ctx, open.ID, "", "sup"); !errors.Is(err, fenced) {
		t.Errorf("a fenced start: %v, want the fence's error", err)
	}
	var n, entries int
	if err := db.SQL().QueryRow(`SELECT (SELECT count(*) FROM dispatches), (SELECT count(*) FROM audit_entries)`).Scan(&n, &entries); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(ctx, open.ID); err != nil || got.State != "accepted" || n != 1 || entries != 1 {
		t.Errorf("after fenced writes: %d dispatches, %d audit entries, the first %v (%v); want 1, 1, accepted", n, entries, got.State, err)
	}
}
