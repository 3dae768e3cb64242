package audit_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest/s3test"
	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/anchor"
	"github.com/agora-dev/agora/internal/audit/verify"
	"github.com/agora-dev/agora/internal/s3"
	"github.com/agora-dev/agora/internal/store"
)

func newS3Anchor(t *testing.T, c *s3.Client) *anchor.S3 {
	t.Helper()
	a, err := anchor.NewS3(c, "agora", 365*24*time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestS3Anchor_Checkpoint: each checkpoint becomes an object under COMPLIANCE retention
// in a real versitygw, and the server then refuses its rewrite and its deletion.
func TestS3Anchor_Checkpoint(t *testing.T) {
	srv := s3test.Shared(t)
	c := srv.Client(t, srv.Bucket(t, true))
	f := newFixture(t, newS3Anchor(t, c))
	appendN(t, f.db, 0, 3)
	res := f.checkpoint(t)
	if err := res.Err(); err != nil || len(res.Anchors) != 1 || res.Anchors[0].Evidence == nil {
		t.Fatalf("got anchors %+v (%v), want one evidence", res.Anchors, err)
	}
	ev := res.Anchors[0].Evidence
	if ev.Type != verify.AnchorS3 || ev.Locator != anchor.S3AnchorName("agora", 3) || !strings.Contains(string(ev.Receipt), "COMPLIANCE until") {
		t.Errorf("evidence %+v", ev)
	}
	appendN(t, f.db, 3, 2)
	f.checkpoint(t)
	names, err := c.List(t.Context(), anchor.S3AnchorDir("agora"))
	if err != nil || len(names) != 2 || names[1] != anchor.S3AnchorName("agora", 5) {
		t.Fatalf("bucket holds %v (%v), want checkpoints 3 and 5", names, err)
	}
	info, err := c.Head(t.Context(), names[0])
	if err != nil || info.LockMode != "COMPLIANCE" || info.RetainUntil.Before(time.Now().Add(364*24*time.Hour)) {
		t.Errorf("object %s: %+v (%v), want COMPLIANCE for a year", names[0], info, err)
	}
	// Attacks inside retention: rewrite the anchor, delete its version. The server refuses.
	if _, err := c.Put(t.Context(), names[0], []byte("forged checkpoint"), true, nil); !errors.Is(err, s3.ErrExists) {
		t.Errorf("rewrite of an anchor: got %v, want the server's refusal", err)
	}
	if err := c.Delete(t.Context(), names[0], info.VersionID); !errors.Is(err, s3.ErrLocked) {
		t.Errorf("delete of an anchor's locked version: got %v, want the server's refusal", err)
	}
	if got, _, err := c.Get(t.Context(), names[0], info.VersionID, 4096); err != nil || !strings.Contains(string(got), "\n3\n") {
		t.Errorf("the anchor after the attempts: %q, %v", got, err)
	}
}

// TestS3Anchor_DetectsDatabaseRollback: a database restored to an older copy is refused by
// the bucket's later checkpoint, and nothing is written for it.
func TestS3Anchor_DetectsDatabaseRollback(t *testing.T) {
	srv := s3test.Shared(t)
	c := srv.Client(t, srv.Bucket(t, true))
	f := newFixture(t, newS3Anchor(t, c))
	appendN(t, f.db, 0, 10)
	f.checkpoint(t)
	old := filepath.Join(t.TempDir(), "old.db")
	if _, err := f.db.SQL().Exec(`VACUUM INTO ?`, old); err != nil {
		t.Fatal(err)
	}
	appendN(t, f.db, 10, 10)
	f.checkpoint(t)
	f.db.Close()
	for _, suffix := range []string{"-wal", "-shm"} {
		os.Remove(f.path + suffix)
	}
	if err := os.Rename(old, f.path); err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(t.Context(), f.path, audit.Migrations)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	f.db = db
	f.cp = f.checkpointer(t, newS3Anchor(t, c))
	appendN(t, f.db, 100, 15)
	res := f.checkpoint(t)
	var ie *audit.InconsistencyError
	if !res.Created || !errors.As(res.Err(), &ie) || ie.Earlier.Size != 20 {
		t.Fatalf("got created %v, anchor error %v; want an inconsistency with the bucket's checkpoint 20", res.Created, res.Err())
	}
	if names, _ := c.List(t.Context(), anchor.S3AnchorDir("agora")); len(names) != 2 {
		t.Errorf("bucket holds %v: a rolled-back log was anchored", names)
	}
}
