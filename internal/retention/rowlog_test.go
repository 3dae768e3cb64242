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
