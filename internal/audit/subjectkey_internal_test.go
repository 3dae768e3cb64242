package audit

import (
	"context"
	"database/sql"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/store"
)

// subjectKeyIndex is orch's migration "orch audit log indexed by run", which this package's
// queries must serve (orch.Migrations appends it; this package cannot import orch).
const subjectKeyIndex = `DROP INDEX audit_entries_subject; CREATE INDEX audit_entries_run ON audit_entries(` + SubjectKey + `, seq);`

// keyedSubjects are subjects whose first 30 characters collide or nearly do: a run of a
// ULID id, its tasks, a run whose id extends that id (same key, not its entry), a run whose
// id is that id less its last character (a key that is a prefix of the first), short ids,
// other families, and a subject of 30 characters exactly followed by more after a '/'.
func keyedSubjects() []string {
	const ulid = "01KQ0000000000000000000000" // 26 characters: "run/" + ulid is 30
	return []string{
		"run/" + ulid, "run/" + ulid + "/task/a", "run/" + ulid + "/task/b/x", "run/" + ulid + "x", "run/" + ulid + "x/task/a",
		"run/" + ulid[:25], "run/" + ulid[:25] + "/task/a", "run/" + ulid[:25] + "0",
		"run/r1", "run/r1/task/a", "run/r10", "run/r1.", "run/r", "schedule/nightly", "dispatch/D1", "dispatch/D1/x", "run",
		"run/" + ulid + "/task/" + strings.Repeat("é", 20), "run/é" + ulid, "run/é" + ulid + "/task/z",
	}
}

// TestSubjectKey_QueriesExactOnBothSchemas appends entries of keyedSubjects to a log indexed
// by whole subjects (agora.db) and to one indexed by SubjectKey (orch.db), then asks List and
// selectSubjects for every subject and some that hold none: each answer is exactly the
// entries a scan of the whole log selects, on both, and on orch.db each is read through
// audit_entries_run (no scan of audit_entries), on agora.db through audit_entries_subject.
func TestSubjectKey_QueriesExactOnBothSchemas(t *testing.T) {
	ctx := context.Background()
	subjects := keyedSubjects()
	asked := append(slices.Clone(subjects), "run/01KQ", "run/01KQ0000000000000000000000/task", "dispatch", "nothing/here", "run/r1/task")
	for _, schema := range []string{"agora", "orch"} {
		t.Run(schema, func(t *testing.T) {
			db, err := store.Open(ctx, filepath.Join(t.TempDir(), schema+".db"), Migrations)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			index := "audit_entries_subject"
			if schema == "orch" {
				index = "audit_entries_run"
				if _, err := db.SQL().ExecContext(ctx, subjectKeyIndex); err != nil {
					t.Fatal(err)
				}
			}
			l := New(func() time.Time { return time.Date(2026, 11, 25, 7, 0, 0, 0, time.UTC) })
			for round := range 3 {
				var entries []Entry
				for i, s := range subjects {
					entries = append(entries, Entry{Actor: "orch", Kind: "k" + string(rune('a'+(i+round)%3)), Subject: s, Details: map[string]any{"round": int64(round)}})
				}
				if err := db.Tx(ctx, func(tx *sql.Tx) error { _, err := l.AppendAll(ctx, tx, entries); return err }); err != nil {
					t.Fatal(err)
				}
			}
			all := scanAll(t, db.SQL())
			for _, s := range asked {
				var wantIs, wantUnder []int64
				for _, e := range all {
					if e.subject == s {
						wantIs = append(wantIs, e.seq)
					}
					if e.subject == s || strings.HasPrefix(e.subject, s+"/") {
						wantUnder = append(wantUnder, e.seq)
					}
				}
				recs, err := List(ctx, db.SQL(), ListOptions{Subject: s})
				if err != nil {
					t.Fatal(err)
				}
				var gotIs []int64
				for _, r := range recs {
					gotIs = append(gotIs, int64(r.Seq))
				}
				if !slices.Equal(gotIs, wantIs) {
					t.Errorf("List(%q) = %v, want %v", s, gotIs, wantIs)
				}
				sel, err := selectSubjects(ctx, db.SQL(), 0, uint64(len(all)), "", []string{s})
				if err != nil {
					t.Fatal(err)
				}
				var gotUnder []int64
				for _, e := range sel {
					gotUnder = append(gotUnder, int64(e.Index))
				}
				if !slices.Equal(gotUnder, wantUnder) {
					t.Errorf("selectSubjects(%q) = %v, want %v", s, gotUnder, wantUnder)
				}
			}
			// List and a count of a subject's entries (orch's load) search the index;
			// selectSubjects, bounded by its sequence range, searches either that range (as it
			// did before the key: SQLite's choice) or the index, never the whole table.
			listSQL, listArgs := listQuery(ListOptions{Subject: asked[0], Limit: 5})
			for name, q := range map[string]struct {
				sql  string
				args []any
			}{"List": {listSQL, listArgs}, "count": {`SELECT COUNT(*) FROM audit_entries WHERE ` + UnderSubject, UnderSubjectArgs(asked[0])},
				"selectSubjects": {selectSubjectSQL, append(UnderSubjectArgs(asked[0]), int64(0), int64(1<<40))}} {
				plan := queryPlan(t, db.SQL(), q.sql, q.args...)
				if name == "selectSubjects" && strings.HasPrefix(plan, "SEARCH audit_entries USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)") {
					continue
				}
				if !strings.Contains(plan, index) || strings.Contains(plan, "SCAN audit_entries") {
					t.Errorf("%s on %s.db: plan %q, want a search of %s", name, schema, plan, index)
				}
			}
		})
	}
}

type scanned struct {
	seq     int64
	subject string
}

func scanAll(t *testing.T, db *sql.DB) []scanned {
	t.Helper()
	rows, err := db.Query(`SELECT seq, subject FROM audit_entries ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []scanned
	for rows.Next() {
		var e scanned
		if err := rows.Scan(&e.seq, &e.subject); err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// queryPlan is EXPLAIN QUERY PLAN's details for query, joined.
func queryPlan(t *testing.T, db *sql.DB, query string, args ...any) string {
	t.Helper()
	rows, err := db.Query(`EXPLAIN QUERY PLAN `+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		out = append(out, detail)
	}
	return strings.Join(out, "; ")
}
