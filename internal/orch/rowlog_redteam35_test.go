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

// TestRedTeam35_HostileRecordAtRead: records an attacker with disk access writes (a count
// of 2^63 runs, a field claiming 16 MiB in 3 bytes, a run reference past the record's runs)
// make every read-only reader's answer a clear error naming the record, never a panic, an
// allocation of the claimed size, or a skipped record. (Held.)
func TestRedTeam35_HostileRecordAtRead(t *testing.T) {
	ctx := context.Background()
	for name, rec := range map[string][]byte{
		"count":     {1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
		"field":     {1, 1, 0x80, 0x80, 0x80, 0x08, 'r'},
		"reference": append((&logRecord{}).encode(nil)[:1], 1, 1, 'r', 1, 5, 0),
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "orch.db")
			db, err := store.Open(ctx, path, Migrations())
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.SQL().Exec(`INSERT INTO runs(id, name, digest, state, actor, created_at) VALUES ('r', 'n', 'd', 'running', 'a', 'x')`); err != nil {
				t.Fatal(err)
			}
			if _, err := db.SQL().Exec(`INSERT INTO row_log(record) VALUES (?)`, rec); err != nil {
				t.Fatal(err)
			}
			ro, err := store.OpenReadOnly(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			defer ro.Close()
			_, _, err = NewReader(ro.SQL()).Counts(ctx, "r")
			if err == nil || !strings.Contains(err.Error(), "orch.db row log record 1: damaged row log record") {
				t.Fatalf("a read-only reader over the %s record: %v", name, err)
			}
		})
	}
}
