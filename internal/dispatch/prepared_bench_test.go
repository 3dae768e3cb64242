package dispatch

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/store"
)

// BenchmarkRecords_Get reads one record (the record, its events, its approvals), as accept,
// supervise, started and finish each do: "prepared" through the Records' statements, "ad
// hoc" with the SQL text parsed on every query.
//
//	go test ./internal/dispatch -run '^$' -bench Records_Get -benchmem
func BenchmarkRecords_Get(b *testing.B) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(b.TempDir(), "agora.db"), append(append([]store.Migration{}, audit.Migrations...), Migrations...))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	prepared := NewRecords(db, audit.New(nil), nil)
	r := &Record{ID: NewID(time.Now()), Subagent: "s", SubagentDigest: "sha256:00", Envs: []EnvRef{}, Target: "local", Sandbox: "bwrap",
		Network: "none", InputDigest: "sha256:00", Timeout: Duration(time.Minute), Actor: "bench"}
	if err := prepared.Accept(ctx, r); err != nil {
		b.Fatal(err)
	}
	adHoc := &Records{db: db, log: prepared.log, now: prepared.now} // no statements
	for _, c := range []struct {
		name string
		s    *Records
	}{{"prepared", prepared}, {"ad-hoc", adHoc}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := c.s.Get(ctx, r.ID); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRecords_Lifecycle is a dispatch's three transactions on its record: accept,
// started and finish, each with its event, its audit entry and the read back inside it, with
// the Records' prepared reads and ad hoc. Preparing the writes as well
// was measured and gave nothing (2.67 vs 2.35 ms at load 17): the commits dominate.
//
//	go test ./internal/dispatch -run '^$' -bench Records_Lifecycle -benchmem
func BenchmarkRecords_Lifecycle(b *testing.B) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(b.TempDir(), "agora.db"), append(append([]store.Migration{}, audit.Migrations...), Migrations...))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	prepared := NewRecords(db, audit.New(nil), nil)
	adHoc := &Records{db: db, log: prepared.log, now: prepared.now} // no statements
	for _, c := range []struct {
		name string
		s    *Records
	}{{"prepared", prepared}, {"ad-hoc", adHoc}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				r := &Record{ID: NewID(time.Now()), Subagent: "s", SubagentDigest: "sha256:00", Envs: []EnvRef{}, Target: "local", Sandbox: "bwrap",
					Network: "none", InputDigest: "sha256:00", Timeout: Duration(time.Minute), Actor: "bench"}
				if err := c.s.Accept(ctx, r); err != nil {
					b.Fatal(err)
				}
				if _, err := c.s.started(ctx, r.ID, "local:bench", selfSupervisor(), nil); err != nil {
					b.Fatal(err)
				}
				if _, _, err := c.s.finish(ctx, r.ID, Outcome{State: lifecycle.DispatchFinished}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
