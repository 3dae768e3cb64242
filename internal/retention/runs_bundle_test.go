package retention_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/audittest"
	"github.com/agora-dev/agora/internal/audit/verify"
	"github.com/agora-dev/agora/internal/retention"
)

// exportOrch checkpoints orch.db's log and exports sel as `agora orch audit` would, written
// and parsed back, with its verifier key.
func exportOrch(t *testing.T, o *orchHome, sel audit.Selection) (*verify.Bundle, string) {
	t.Helper()
	if o.signer == nil {
		o.signer, o.key = audittest.NewKey(t)
	}
	key := o.key
	cp, err := audit.NewCheckpointer(o.db, audit.CheckpointerOptions{LogName: "orch.db", Signer: o.signer, VerifierKey: key})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := cp.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	exported, err := cp.Export(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := verify.WriteBundle(&buf, exported); err != nil {
		t.Fatal(err)
	}
	b, err := verify.ParseBundleBytes(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return b, key
}

// verifyOrchLog exports orch.db's whole log and fails t unless it verifies.
func verifyOrchLog(t *testing.T, o *orchHome) *verify.Report {
	t.Helper()
	b, key := exportOrch(t, o, audit.Selection{})
	rep := verify.Verify(b, verify.Options{Key: key})
	if !rep.OK {
		t.Fatalf("orch.db's log does not verify: %+v", rep.Failed())
	}
	return rep
}

func row(r *verify.Report, check string) *verify.Result {
	for i, c := range r.Checks {
		if c.Check == check {
			return &r.Checks[i]
		}
	}
	return nil
}

// TestRuns_ExportAfterPurgeVerifies: orch.db's log exported after a run purge verifies, its
// purged_runs names the run that is gone and its purged-runs row says so; a bundle of a kept
// run has no such row; purged_runs edited by hand (a run dropped, or one added with no
// record) fails verify.
func TestRuns_ExportAfterPurgeVerifies(t *testing.T) {
	h := newHome(t)
	o := h.orchDB(t)
	o.add(t, orun{id: "r-old", name: "weekly", ended: ago(200), sealed: true, tasks: 4})
	o.add(t, orun{id: "r-new", ended: ago(2), sealed: true, tasks: 4})
	if _, _, err := h.sweeper(runsPolicy).Run(context.Background(), "ops", retention.RoleOperator, nil); err != nil {
		t.Fatal(err)
	}
	b, key := exportOrch(t, o, audit.Selection{})
	if len(b.PurgedRuns) != 1 || b.PurgedRuns[0].Run != "r-old" || b.PurgedRuns[0].Name != "weekly" {
		t.Fatalf("purged_runs %+v", b.PurgedRuns)
	}
	rep := verify.Verify(b, verify.Options{Key: key})
	r := row(rep, verify.CheckPurgedRuns)
	if !rep.OK || r == nil || !r.OK || !strings.Contains(r.Detail, "1 runs purged") || !strings.Contains(r.Detail, "r-old (weekly, ended ") {
		t.Fatalf("verify: ok %v, row %+v, failed %+v", rep.OK, r, rep.Failed())
	}

	kept, key2 := exportOrch(t, o, audit.Selection{Subjects: []string{"run/r-new"}})
	rep = verify.Verify(kept, verify.Options{Key: key2})
	if !rep.OK || len(kept.PurgedRuns) != 0 || row(rep, verify.CheckPurgedRuns) != nil {
		t.Fatalf("bundle of the kept run: ok %v, purged_runs %+v", rep.OK, kept.PurgedRuns)
	}

	dropped := *b
	dropped.PurgedRuns = nil
	rep = verify.Verify(&dropped, verify.Options{Key: key})
	if r := row(rep, verify.CheckPurgedRuns); rep.OK || r == nil || r.OK || !strings.Contains(r.Detail, "does not name it") {
		t.Fatalf("purged_runs dropped: ok %v, row %+v", rep.OK, r)
	}
	added := *b
	added.PurgedRuns = append(append([]verify.PurgedRun{}, b.PurgedRuns...), verify.PurgedRun{Entry: b.PurgedRuns[0].Entry, Run: "r-new"})
	rep = verify.Verify(&added, verify.Options{Key: key})
	if r := row(rep, verify.CheckPurgedRuns); rep.OK || r == nil || r.OK || !strings.Contains(r.Detail, "no verified retention.run_purged entry") {
		t.Fatalf("a run listed purged with no record: ok %v, row %+v", rep.OK, r)
	}
}
