package retention_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/digest"
	"github.com/agora-dev/agora/internal/retention"
)

// TestPurge_RecordsThenDeletes: a dispatch ended 100 days ago loses its patch, outputs, input
// and logs under {blobs: 90d, logs: 30d}; one ended 40 days ago loses only its logs; each purge
// is one retention.purged entry naming the products, the why and the role, and a row per
// product marked done.
func TestPurge_RecordsThenDeletes(t *testing.T) {
	h := newHome(t)
	old := now.Add(-200 * 24 * time.Hour) // stored long before the sweep
	patch, out, logOld := h.put(t, []byte("patch"), old), h.put(t, []byte("out"), old), h.put(t, []byte("log old"), old)
	patch40, log40 := h.put(t, []byte("patch 40"), old), h.put(t, []byte("log 40"), old)
	h.insert(t, disp{id: "d-old", state: "finished", ended: ago(100), patch: patch, stdout: logOld, outputs: map[string]digest.Digest{"report.md": out}})
	h.insert(t, disp{id: "d-40", state: "failed", ended: ago(40), patch: patch40, stdout: log40})

	plan, res, err := h.sweeper(policy).Run(context.Background(), "alice", retention.RoleOperator, nil)
	if err != nil {
		t.Fatal(err)
	}
	// d-old: input, patch, output, stdout; d-40: stdout.
	if len(plan.Items) != 5 || res.Recorded != 5 || res.Deleted != 5 {
		t.Fatalf("plan %+v, result %+v: want 5 products recorded and deleted", plan.Items, res)
	}
	for _, d := range []digest.Digest{patch, out, logOld, log40} {
		if h.has(d) {
			t.Errorf("%s still stored", d)
		}
	}
	if !h.has(patch40) {
		t.Errorf("d-40's patch (40 days, blobs 90d) was deleted")
	}
	recs, err := audit.List(context.Background(), h.db.SQL(), audit.ListOptions{Kind: "retention.purged"})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 {
		t.Fatalf("%d retention.purged entries, want 2 (one per dispatch)", len(recs))
	}
	r := recs[0]
	b, _ := json.Marshal(r.Details)
	if r.Actor != "alice" || r.Subject != "dispatch/d-old" || r.Details["role"] != "operator" ||
		!strings.Contains(string(b), `"product":"patch"`) || !strings.Contains(string(b), `"product":"output:report.md"`) ||
		!strings.Contains(string(b), "retention.blobs 90d: ended") || !strings.Contains(string(b), string(patch)) {
		t.Fatalf("entry %+v %s", r, b)
	}
	if n := count(t, h.db.SQL(), `SELECT count(*) FROM retention_purged WHERE done = 1`); n != 5 {
		t.Fatalf("%d purge rows done, want 5", n)
	}
	// A second sweep finds nothing new and records nothing.
	plan, res, err = h.sweeper(policy).Run(context.Background(), "alice", retention.RoleOperator, nil)
	if err != nil || len(plan.Items) != 0 || res.Recorded != 0 {
		t.Fatalf("second sweep: %v, %+v, %+v", err, plan.Items, res)
	}
}
