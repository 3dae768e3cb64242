package dispatch_test

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoradb"
	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// TestRecords_EndedProvenance: a run bundle gets a dispatch's provenance statement only once
// the dispatch has ended, and then exactly the bytes whose digest its terminal entry records.
func TestRecords_EndedProvenance(t *testing.T) {
	ctx := t.Context()
	h, err := home.Open(ctx, filepath.Join(t.TempDir(), "home"), agoradb.Migrations())
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	records := dispatch.NewRecords(h.DB, audit.New(nil), nil)
	id := dispatch.NewID(time.Now())
	r := &dispatch.Record{ID: id, Subagent: "writer", SubagentDigest: "sha256:ab", Target: "local", Sandbox: "bwrap", Network: "none", Actor: "test"}
	if err := records.Accept(ctx, r); err != nil {
		t.Fatal(err)
	}
	_, err = records.EndedProvenance(ctx, id)
	if err == nil || !strings.Contains(err.Error(), "dispatch "+id+" is still accepted") {
		t.Fatalf("a live dispatch: got %v, want a refusal naming its state", err)
	}
	if _, err := records.EndedProvenance(ctx, "01ARZ3NDEKTSV4RRFFQ69G5FAV"); !errors.Is(err, dispatch.ErrNotFound) {
		t.Errorf("an unknown dispatch: got %v, want ErrNotFound", err)
	}
	if _, err := records.Finish(ctx, id, dispatch.Outcome{State: lifecycle.DispatchFailed, Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	got, err := records.EndedProvenance(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	ended, err := records.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	want, err := dispatch.Provenance(ended)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("EndedProvenance = %s, want %s", got, want)
	}
	recs, err := audit.List(ctx, h.DB.SQL(), audit.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	last := recs[len(recs)-1]
	if last.Subject != "dispatch/"+id || last.Details["manifest"] != dispatch.ProvenanceDigest(got) {
		t.Errorf("terminal entry %s %v does not record the digest of %s", last.Subject, last.Details, got)
	}
}
