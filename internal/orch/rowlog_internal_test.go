package orch

import (
	"bytes"
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/orch/rowlog"
	"github.com/agora-dev/agora/internal/store"
)

func sampleRecord() *logRecord {
	return &logRecord{
		tasks: []taskImage{
			{runID: "01RUN", idx: 3, state: "running", attempts: 2, failures: 1, dispatchID: "01D", readySeq: 77, retryAt: "2026-11-25T01:00:00.000000000Z",
				reason: "r", detail: "d", question: "q?", answer: "a", cancel: true, review: `{"x":1}`},
			{runID: "01RUN2", idx: 0, state: "pending"},
		},
		inserts: []attemptImage{{dispatchID: "01D", runID: "01RUN", taskIdx: 3, number: 2, state: "live", parentID: "01P", inputs: `[{"a":1}]`,
			firedAt: "2026-11-25T01:00:00.000000001Z"}},
		ends: []endImage{{id: "01E", state: "succeeded", reason: "", endedAt: "2026-11-25T01:00:01.000000000Z", usage: `{"input_tokens":3}`, verdict: ""}},
	}
}

// TestLogRecordRoundTrip: a record decodes to what was encoded, every field.
func TestLogRecordRoundTrip(t *testing.T) {
	want := sampleRecord()
	got, err := decodeLogRecord(want.encode(nil))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded %+v\nwant    %+v", got, want)
	}
	b := want.encode(nil)
	for n := range len(b) {
		if _, err := decodeLogRecord(b[:n]); err == nil {
			t.Errorf("a record cut to %d of %d bytes decoded", n, len(b))
		}
	}
}

// TestFoldFailsWhole is the attack of a fold stopped halfway: the second record fires an
// attempt whose row exists, so the fold fails after it updated the first record's task. The
// fold and its records' deletion commit together: nothing of it stays, and both records wait.
func TestFoldFailsWhole(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "orch.db"), Migrations(), store.FullSync())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{
		`INSERT INTO runs(id, name, digest, state, actor, created_at, sealed_at) VALUES ('r', 'n', 'd', 'succeeded', 'a', 'x', 'x')`,
		`INSERT INTO tasks(run_id, idx, id, state) VALUES ('r', 0, 't', 'pending')`,
		`INSERT INTO attempts(dispatch_id, run_id, task_idx, number, state, fired_at) VALUES ('D1', 'r', 0, 1, 'live', 'x')`,
	} {
		if _, err := db.SQL().Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	one := &logRecord{tasks: []taskImage{{runID: "r", idx: 0, state: "succeeded", attempts: 1, dispatchID: "D1"}}}
	two := &logRecord{inserts: []attemptImage{{dispatchID: "D1", runID: "r", taskIdx: 0, number: 1, firedAt: "y"}}}
	for _, r := range []*logRecord{one, two} {
		if _, err := db.SQL().Exec(`INSERT INTO row_log(record) VALUES (?)`, r.encode(nil)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Open(ctx, db, audit.New(nil), nil, Options{}); err == nil || !strings.Contains(err.Error(), "fold the row log into attempts") {
		t.Fatalf("Open: %v", err)
	}
	var state string
	var n int
	if err := db.SQL().QueryRow(`SELECT state FROM tasks WHERE run_id = 'r'`).Scan(&state); err != nil || state != "pending" {
		t.Errorf("task row after the failed fold: %q %v, want pending", state, err)
	}
	if err := db.SQL().QueryRow(`SELECT COUNT(*) FROM row_log`).Scan(&n); err != nil || n != 2 {
		t.Errorf("%d records after the failed fold, want both (%v)", n, err)
	}
	var rec []byte
	db.SQL().QueryRow(`SELECT record FROM row_log ORDER BY seq LIMIT 1`).Scan(&rec)
	if !bytes.Equal(rec, one.encode(nil)) {
		t.Error("the first record changed")
	}
}

// encode appends r's binary form (rowlog.Record's) to dst.
func (r *logRecord) encode(dst []byte) []byte { return r.encodeWith(dst, &rowlog.Record{}) }

// decodeLogRecord parses a record encode wrote (rowlog.Decode); its fired attempts are live.
func decodeLogRecord(b []byte) (*logRecord, error) {
	w, err := rowlog.Decode(b)
	if err != nil {
		return nil, err
	}
	r := &logRecord{tasks: make([]taskImage, len(w.Tasks)), inserts: make([]attemptImage, len(w.Inserts)), ends: make([]endImage, len(w.Ends))}
	for i := range w.Tasks {
		r.tasks[i] = taskFromWire(&w.Tasks[i])
	}
	for i := range w.Inserts {
		r.inserts[i] = attemptFromWire(&w.Inserts[i])
	}
	for i := range w.Ends {
		r.ends[i] = endFromWire(&w.Ends[i])
	}
	return r, nil
}
