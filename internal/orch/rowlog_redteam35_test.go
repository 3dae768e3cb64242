package orch

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/store"
)

// TestRedTeam35_EndBeforeFire is the attack of records out of order (a bug's or an attacker's
// with disk access): the first ends attempt D, the second fires it. As the statements they
// stand for, the end updated no row and D stays live, which is what a reader's overlay showed;
// the fold applied the end after the insert and made D succeeded, so a reader saw one state
// before the fold and another after it. The engine never ends an attempt before firing it:
// such a log is damaged, a clear error at Open and at every read, and kept.
func TestRedTeam35_EndBeforeFire(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "orch.db"), Migrations(), store.FullSync())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{
		`INSERT INTO runs(id, name, digest, state, actor, created_at) VALUES ('r', 'n', 'd', 'running', 'a', 'x')`,
		`INSERT INTO tasks(run_id, idx, id, state) VALUES ('r', 0, 't', 'running')`,
	} {
		if _, err := db.SQL().Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	end := &logRecord{ends: []endImage{{id: "D", state: "succeeded", endedAt: "y"}}}
	fire := &logRecord{inserts: []attemptImage{{dispatchID: "D", runID: "r", taskIdx: 0, number: 1, inputs: "[]", firedAt: "x"}}}
	for _, r := range []*logRecord{end, fire} {
		if _, err := db.SQL().Exec(`INSERT INTO row_log(record) VALUES (?)`, r.encode(nil)); err != nil {
			t.Fatal(err)
		}
	}
	const want = "orch.db row log record 2: damaged row log record: attempt D fired after the log ended it"
	err = readTx(ctx, db.SQL(), func(querier, *overlay) error { return nil })
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a read over the records: %v, want %q", err, want)
	}
	if _, err := Open(ctx, db, audit.New(nil), nil, Options{}); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Open over the records: %v, want %q", err, want)
	}
	var n int
	if err := db.SQL().QueryRow(`SELECT COUNT(*) FROM row_log`).Scan(&n); err != nil || n != 2 {
		t.Errorf("%d records left (%v), want both kept", n, err)
	}
	if err := db.SQL().QueryRow(`SELECT COUNT(*) FROM attempts`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d attempt rows (%v), want none written", n, err)
	}
}
