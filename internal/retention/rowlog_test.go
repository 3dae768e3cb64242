package retention_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/retention"
	"github.com/agora-dev/agora/internal/store"
)

// TestAttack_UnfoldedRowLogKeepsEverything: orch.db's engine writes attempt rows as a row log
// folded into the attempts table later (orch's rowlog.go). An ended dispatch whose attempt of
// a live run is only in the log cannot be told from one of no run here, so while the log
// holds a record, a plan keeps every dispatch whole; once it is folded, aged blobs go.
func TestAttack_UnfoldedRowLogKeepsEverything(t *testing.T) {
	h := newHome(t)
	patch := h.put(t, []byte("the patch a live run's next task reads"), longAgo)
	h.insert(t, disp{id: "attempt", state: "finished", ended: ago(100), patch: patch})
	path := filepath.Join(h.dir, "orch", "orch.db")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	odb, err := store.Open(context.Background(), path, orch.Migrations())
	if err != nil {
		t.Fatal(err)
	}
	defer odb.Close()
	if _, err := odb.SQL().Exec(`INSERT INTO row_log(record) VALUES (x'01')`); err != nil {
		t.Fatal(err)
	}
	plan, err := retention.MakePlan(context.Background(), h.db.SQL(), odb.SQL(), policy, now)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range plan.Items {
		if it.Dispatch == "attempt" {
			t.Fatalf("planned to purge %s of %s while orch.db's row log holds unfolded records", it.Product, it.Dispatch)
		}
	}
	if _, err := odb.SQL().Exec(`DELETE FROM row_log`); err != nil {
		t.Fatal(err)
	}
	plan, err = retention.MakePlan(context.Background(), h.db.SQL(), odb.SQL(), policy, now)
	if err != nil {
		t.Fatal(err)
	}
	purged := false
	for _, it := range plan.Items {
		purged = purged || it.Dispatch == "attempt"
	}
	if !purged {
		t.Fatal("with the log folded, the aged dispatch is not planned: the test attacked nothing")
	}
}

// TestAttack_UnfoldedRowLogKeepsItsRunsOnly: a waiting record keeps whole the dispatches of
// the runs its runs column names (an attempt of one may be in that record alone), and no
// other: a serve never idle long enough to fold still purges the rest. A column that does not
// name its runs readably keeps every dispatch (fail closed).
func TestAttack_UnfoldedRowLogKeepsItsRunsOnly(t *testing.T) {
	h := newHome(t)
	for _, d := range []struct{ id, run string }{{"named", "r-waiting"}, {"other", "r-folded"}, {"plain", ""}} {
		patch := h.put(t, []byte("the patch of "+d.id), longAgo)
		h.insert(t, disp{id: d.id, state: "finished", ended: ago(100), patch: patch})
		if _, err := h.db.SQL().Exec(`UPDATE dispatches SET run_id = ? WHERE id = ?`, d.run, d.id); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(h.dir, "orch", "orch.db")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	odb, err := store.Open(context.Background(), path, orch.Migrations())
	if err != nil {
		t.Fatal(err)
	}
	defer odb.Close()
	planned := func() map[string]bool {
		t.Helper()
		plan, err := retention.MakePlan(context.Background(), h.db.SQL(), odb.SQL(), policy, now)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, it := range plan.Items {
			out[it.Dispatch] = true
		}
		return out
	}
	if _, err := odb.SQL().Exec(`INSERT INTO row_log(record, runs) VALUES (x'01', '["r-waiting"]')`); err != nil {
		t.Fatal(err)
	}
	if got := planned(); got["named"] || !got["other"] || !got["plain"] {
		t.Fatalf("with a record naming r-waiting: planned %v; want other and plain, never named", got)
	}
	for _, col := range []string{"", "[]", "null", "not json", `{"r-waiting":1}`} {
		if _, err := odb.SQL().Exec(`INSERT INTO row_log(record, runs) VALUES (x'01', ?)`, col); err != nil {
			t.Fatal(err)
		}
		if got := planned(); len(got) != 0 {
			t.Errorf("with a record whose runs column is %q: planned %v; want every dispatch kept", col, got)
		}
		if _, err := odb.SQL().Exec(`DELETE FROM row_log WHERE runs = ?`, col); err != nil {
			t.Fatal(err)
		}
	}
}
