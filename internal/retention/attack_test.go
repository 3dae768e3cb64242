package retention_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/blob"
	"github.com/agora-dev/agora/internal/digest"
	"github.com/agora-dev/agora/internal/retention"
)

var longAgo = now.Add(-200 * 24 * time.Hour)

func run(t *testing.T, h *testHome) (*retention.Plan, retention.Result) {
	t.Helper()
	p, res, err := h.sweeper(policy).Run(context.Background(), "alice", retention.RoleOperator, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p, res
}

// TestAttack_SharedBlobSurvives: blobs are content-addressed, so an old dispatch's patch is
// the very blob a new dispatch's identical output is. The old one aging out must not delete
// what the new one still names; nor what a live dispatch (no result recorded yet) stored
// again since the sweep began; nor the input of an old dispatch whose answer is still running.
func TestAttack_SharedBlobSurvives(t *testing.T) {
	h := newHome(t)
	shared := h.put(t, []byte("same bytes"), longAgo)
	h.insert(t, disp{id: "old", state: "finished", ended: ago(100), patch: shared})
	h.insert(t, disp{id: "new", state: "finished", ended: ago(1), outputs: map[string]digest.Digest{"a.txt": shared}})

	// A live dispatch stored the old patch's bytes again a moment ago and has not recorded it.
	restored := h.put(t, []byte("stored again by a live dispatch"), longAgo)
	h.insert(t, disp{id: "old2", state: "finished", ended: ago(100), patch: restored})
	h.insert(t, disp{id: "live", state: "started", created: now.Add(-time.Hour).Format(ts)})
	if err := os.Chtimes(h.blobPath(restored), now.Add(-30*time.Minute), now.Add(-30*time.Minute)); err != nil {
		t.Fatal(err)
	}

	// An answered dispatch whose resume (its child) is running reads the parent's input.
	parentInput := h.put(t, []byte("parent input"), longAgo)
	h.insert(t, disp{id: "asked", state: "answered", ended: ago(100), input: parentInput})
	h.insert(t, disp{id: "resume", state: "started", parent: "asked", created: now.Add(-time.Minute).Format(ts)})
	// A dispatch waiting for an answer (needs_input) is not ended.
	waiting := h.put(t, []byte("waiting patch"), longAgo)
	h.insert(t, disp{id: "waiting", state: "needs_input", ended: ago(100), patch: waiting})

	plan, res := run(t, h)
	for _, it := range plan.Items {
		if it.Digest == shared || it.Digest == parentInput || it.Digest == waiting {
			t.Errorf("planned to purge %s of %s, which a newer or live dispatch needs", it.Product, it.Dispatch)
		}
	}
	for name, d := range map[string]digest.Digest{"shared": shared, "restored": restored, "parent input": parentInput, "waiting": waiting} {
		if !h.has(d) {
			t.Errorf("the %s blob was deleted", name)
		}
	}
	if res.Deferred != 1 {
		t.Fatalf("result %+v: want the blob stored again by the live dispatch deferred", res)
	}
	// The deferred purge stays recorded, not done: a later sweep, once the live dispatch has
	// recorded the blob, keeps it for good.
	if n := count(t, h.db.SQL(), `SELECT count(*) FROM retention_purged WHERE done = 0 AND digest = ?`, string(restored)); n != 1 {
		t.Fatalf("%d pending purge rows for the deferred blob, want 1", n)
	}
	if _, err := h.db.SQL().Exec(`UPDATE dispatches SET state = 'finished', ended_at = ?, result = ? WHERE id = 'live'`,
		now.Format(ts), `{"outputs":[],"patch":{"digest":"`+string(restored)+`","size":3}}`); err != nil {
		t.Fatal(err)
	}
	_, res = run(t, h)
	if !h.has(restored) || res.KeptAgain != 1 {
		t.Fatalf("result %+v: the blob the live dispatch recorded must be kept", res)
	}
}

// TestAttack_DatesInTheFutureOrZero: a dispatch whose end is in the future, missing, or not
// a time keeps everything (it never ages out by arithmetic on a bad date).
func TestAttack_DatesInTheFutureOrZero(t *testing.T) {
	h := newHome(t)
	var ds []digest.Digest
	for i, ended := range []string{now.Add(400 * 24 * time.Hour).Format(ts), "", "0001-01-01T00:00:00Z", "yesterday", "1970-01-01T00:00:00Z"} {
		d := h.put(t, []byte("patch "+ended), longAgo)
		ds = append(ds, d)
		h.insert(t, disp{id: "d" + string(rune('a'+i)), state: "finished", ended: ended, created: ago(500), patch: d})
	}
	plan, _ := run(t, h)
	for _, it := range plan.Items {
		if it.Product == "patch" && it.Dispatch != "de" {
			t.Errorf("planned to purge %s of %s (ended %v)", it.Product, it.Dispatch, it.EndedAt)
		}
	}
	for i, d := range ds[:4] {
		if !h.has(d) {
			t.Errorf("patch %d deleted", i)
		}
	}
	// 1970 is a real, old date: it ages out like any other.
	if h.has(ds[4]) {
		t.Errorf("the 1970 dispatch's patch was kept")
	}
}

// TestAttack_SymlinkPlanted: a symlink planted as a blob (or as a blob's directory) is never
// followed: the purge is refused for it and the file it points at is untouched.
func TestAttack_SymlinkPlanted(t *testing.T) {
	h := newHome(t)
	outside := filepath.Join(t.TempDir(), "precious")
	if err := os.WriteFile(outside, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-400 * 24 * time.Hour)
	os.Chtimes(outside, old, old)
	d := digest.Sum([]byte("planted"))
	p := h.blobPath(d)
	os.MkdirAll(filepath.Dir(p), 0o700)
	if err := os.Symlink(outside, p); err != nil {
		t.Fatal(err)
	}
	h.insert(t, disp{id: "planted", state: "finished", ended: ago(100), patch: d})

	// A second blob whose directory sha256/ab is a symlink to a directory elsewhere.
	d2 := digest.Sum([]byte("planted dir"))
	elsewhere := t.TempDir()
	victim := filepath.Join(elsewhere, d2.Hex())
	os.WriteFile(victim, []byte("victim"), 0o600)
	os.Chtimes(victim, old, old)
	if err := os.Symlink(elsewhere, filepath.Dir(h.blobPath(d2))); err != nil {
		t.Fatal(err)
	}
	h.insert(t, disp{id: "planted-dir", state: "finished", ended: ago(100), patch: d2})

	_, res := run(t, h)
	if len(res.Refused) != 2 || !strings.Contains(strings.Join(res.Refused, "\n"), "not a regular file") {
		t.Fatalf("result %+v: want both planted blobs refused", res)
	}
	for _, f := range []string{outside, victim} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	if _, err := os.Lstat(p); err != nil {
		t.Errorf("the planted link itself was removed: %v", err)
	}
	_, err := h.blobs.Purge(context.Background(), d, now)
	if !errors.Is(err, blob.ErrNotRegular) {
		t.Fatalf("Purge of a symlink: %v", err)
	}
}

// TestAttack_LogsASandboxWrote: a sandbox chooses its logs' bytes, so it can write exactly a
// catalog blob (a capability's content) or another dispatch's input to stdout. Purging its
// log must not delete the blob those share.
func TestAttack_LogsASandboxWrote(t *testing.T) {
	h := newHome(t)
	capContent := h.put(t, []byte("#!/bin/sh\necho capability\n"), longAgo)
	if _, err := h.db.SQL().Exec(`INSERT INTO catalog_versions(kind, name, digest, size, registered_at, registered_by, meta)
		VALUES ('capability', 'tools', ?, 3, ?, 'alice', '{}')`, string(capContent), ago(300)); err != nil {
		t.Fatal(err)
	}
	otherInput := h.put(t, []byte("input of a newer dispatch"), longAgo)
	h.insert(t, disp{id: "newer", state: "finished", ended: ago(2), input: otherInput})
	h.insert(t, disp{id: "loud", state: "finished", ended: ago(100), stdout: capContent, transcript: otherInput})
	plan, res := run(t, h)
	if !h.has(capContent) || !h.has(otherInput) {
		t.Fatalf("plan %+v result %+v: a log shaped like a catalog blob or a newer input deleted it", plan.Items, res)
	}
}

// TestDryRun_ChangesNothing: planning reads only: the database, the audit log and the store
// are byte for byte as they were.
func TestDryRun_ChangesNothing(t *testing.T) {
	h := newHome(t)
	h.insert(t, disp{id: "old", state: "finished", ended: ago(100), patch: h.put(t, []byte("p"), longAgo)})
	before := snapshot(t, h)
	plan, err := h.sweeper(policy).Plan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Items) != 2 {
		t.Fatalf("plan %+v, want input and patch", plan.Items)
	}
	if after := snapshot(t, h); after != before {
		t.Fatalf("the dry run changed the home:\nbefore %s\nafter  %s", before, after)
	}
}

// snapshot is every blob file with its time, and the rows of the tables a purge writes.
func snapshot(t *testing.T, h *testHome) string {
	var b strings.Builder
	filepath.Walk(filepath.Join(h.dir, "blobs"), func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			b.WriteString(p + " " + fi.ModTime().String() + "\n")
		}
		return nil
	})
	for _, q := range []string{`SELECT count(*) FROM audit_entries`, `SELECT count(*) FROM retention_purged`} {
		b.WriteString(q + " " + string(rune('0'+count(t, h.db.SQL(), q))) + "\n")
	}
	return b.String()
}
