package replicate_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/replicate"
	"github.com/agora-dev/agora/internal/s3"
)

// halfGeneration starts a generation of the database at path whose first sync spans several
// segments (more than 16 MiB), then deletes its last one, the sync's end: what a serve killed
// while it uploaded its start-up copy leaves. It returns the generation's name.
func halfGeneration(t *testing.T, c *s3.Client, path string) string {
	t.Helper()
	ctx := t.Context()
	r, err := replicate.Start(ctx, replicate.Options{Client: c, DB: "agora", Path: path, Identity: identity, Key: testKey, Lag: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	gen := r.Status().Generation
	first, err := c.List(ctx, "replica/agora/"+gen+"/")
	if err != nil {
		t.Fatal(err)
	}
	if len(first) < 2 {
		t.Fatalf("the first sync is %d segment(s); the test needs one spanning several", len(first))
	}
	// Close may ship more (the replicator's own WAL restart after a large first sync); the
	// serve this stands for died before any of it, and before the first sync's end.
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	names, err := c.List(ctx, "replica/agora/"+gen+"/")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names[len(first)-1:] {
		if err := c.Delete(ctx, n, ""); err != nil {
			t.Fatal(err)
		}
	}
	return gen
}

// TestRestore_HalfUploadedNewestGeneration: review 33: a newest generation whose first sync
// never finished uploading blocked every restore. The generation before it is the newest
// whole state: the restore brings it back and names the one it passed over. A replica whose
// only generation is half uploaded fails the restore, and never reads as no replica at all
// (agora restore would then skip orch.db as if no orchestrator had served the home).
func TestRestore_HalfUploadedNewestGeneration(t *testing.T) {
	_, _, c := bucket(t)
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "agora.db")
	db := openDB(t, path)
	insert(t, db, 0, 20)
	r1, err := replicate.Start(ctx, replicate.Options{Client: c, DB: "agora", Path: path, Identity: identity, Key: testKey, Lag: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := r1.Close(ctx); err != nil {
		t.Fatal(err)
	}
	insert(t, db, 20, 32000) // ~20 MiB: the next generation's first sync takes two segments
	half := halfGeneration(t, c, path)

	out := filepath.Join(t.TempDir(), "agora.db")
	res, err := replicate.Restore(ctx, replicate.RestoreOptions{Client: c, DB: "agora", Identity: identity, Key: testKey, Path: out})
	if err != nil {
		t.Fatalf("restore with a half-uploaded newest generation: %v", err)
	}
	if res.Generation != r1.Status().Generation {
		t.Errorf("restored generation %s, want the whole one before it, %s", res.Generation, r1.Status().Generation)
	}
	if len(res.Skipped) != 1 || !strings.Contains(res.Skipped[0], half) || !strings.Contains(res.Skipped[0], "no whole sync") {
		t.Errorf("skipped %q, want the half generation %s named with why", res.Skipped, half)
	}
	wantRows(t, out, 20)

	// Only a half generation: an error saying so, not ErrNoReplica, and no database.
	_, _, c2 := bucket(t)
	only := halfGeneration(t, c2, path)
	err = restoreFails(t, c2, identity, only, "no whole sync")
	if errors.Is(err, replicate.ErrNoReplica) {
		t.Errorf("a replica that exists but restores nothing reads as none: %v", err)
	}
}
