package retention_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/audittest"
	"github.com/agora-dev/agora/internal/audit/verify"
	"github.com/agora-dev/agora/internal/digest"
	"github.com/agora-dev/agora/internal/retention"
)

// exportAfterPurge purges a home's old dispatch and exports the whole log as a bundle, written
// and parsed back as `agora audit export` and `agora verify` do.
func exportAfterPurge(t *testing.T) (b *verify.Bundle, key string, patch digest.Digest) {
	t.Helper()
	h := newHome(t)
	patch = h.put(t, []byte("the patch"), longAgo)
	out := h.put(t, []byte("the output"), longAgo)
	h.insert(t, disp{id: "d-old", state: "finished", ended: ago(100), patch: patch, outputs: map[string]digest.Digest{"r.md": out}})
	h.insert(t, disp{id: "d-new", state: "finished", ended: ago(1), patch: h.put(t, []byte("new patch"), longAgo)})
	if _, _, err := h.sweeper(policy).Run(context.Background(), "alice", retention.RoleOperator, nil); err != nil {
		t.Fatal(err)
	}
	signer, key := audittest.NewKey(t)
	cp, err := audit.NewCheckpointer(h.db, audit.CheckpointerOptions{LogName: "agora.db", Signer: signer, VerifierKey: key})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := cp.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	exported, err := cp.Export(ctx, audit.Selection{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := verify.WriteBundle(&buf, exported); err != nil {
		t.Fatal(err)
	}
	if b, err = verify.ParseBundleBytes(buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	return b, key, patch
}

func purgedRow(r *verify.Report) *verify.Result {
	for i, c := range r.Checks {
		if c.Check == verify.CheckPurged {
			return &r.Checks[i]
		}
	}
	return nil
}

// TestBundle_PurgeThenExportVerifies: a bundle exported after a purge verifies, and its
// purged row names the products that are gone.
func TestBundle_PurgeThenExportVerifies(t *testing.T) {
	b, key, patch := exportAfterPurge(t)
	if len(b.Purged) != 3 {
		t.Fatalf("bundle lists %d purged products, want 3 (input, patch, output): %+v", len(b.Purged), b.Purged)
	}
	rep := verify.Verify(b, verify.Options{Key: key})
	if !rep.OK {
		t.Fatalf("verify failed after a purge: %+v", rep.Failed())
	}
	row := purgedRow(rep)
	if row == nil || !row.OK || !strings.Contains(row.Detail, "d-old patch ("+string(patch)+")") || !strings.Contains(row.Detail, "output:r.md") {
		t.Fatalf("purged row %+v", row)
	}
}

// TestBundle_PurgedListEditedFails: a product dropped from the purged list by hand, or one
// added that no retention.purged entry records (a product missing without a purge record),
// fails verify.
func TestBundle_PurgedListEditedFails(t *testing.T) {
	b, key, _ := exportAfterPurge(t)
	dropped := *b
	dropped.Purged = b.Purged[1:]
	rep := verify.Verify(&dropped, verify.Options{Key: key})
	if row := purgedRow(rep); rep.OK || row == nil || row.OK || !strings.Contains(row.Detail, "does not name it") {
		t.Fatalf("a purged product removed from the list: ok %v, row %+v", rep.OK, row)
	}
	none := *b
	none.Purged = nil
	if rep := verify.Verify(&none, verify.Options{Key: key}); rep.OK {
		t.Fatal("a bundle with its purged list removed verified")
	}
	added := *b
	added.Purged = append(append([]verify.Purged{}, b.Purged...), verify.Purged{Entry: b.Purged[0].Entry, Dispatch: "d-new",
		Product: "patch", Digest: "sha256:" + strings.Repeat("ab", 32)})
	rep = verify.Verify(&added, verify.Options{Key: key})
	if row := purgedRow(rep); rep.OK || row == nil || row.OK || !strings.Contains(row.Detail, "without a purge record") {
		t.Fatalf("a product listed purged with no record: ok %v, row %+v", rep.OK, row)
	}
}
