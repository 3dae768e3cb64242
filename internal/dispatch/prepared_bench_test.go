package dispatch

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/store"
)

// BenchmarkRecords_Get reads one record (the record, its events, its approvals), as accept,
// supervise, started and finish each do: "prepared" through the Records' statements, "ad
// hoc" with the SQL text parsed on every query (what every read did before #28 noop).
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
