package netgw

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/blob"
	"github.com/agora-dev/agora/internal/compute/remote"
	"github.com/agora-dev/agora/internal/digest"
	"github.com/agora-dev/agora/internal/store"
)

// keptMigrations is agora.db's part that kept uploads need.
var keptMigrations = append(append([]store.Migration{}, SessionMigrations...), UploadMigrations...)

// keepingReplica is a replica whose gateway keeps uploads in bucket (a blob store every
// replica reads, as blobs.s3) and db, waiting on replicated (nil: none).
func keepingReplica(t *testing.T, db *store.DB, ca *gw, bucket *blob.Store, replicated func(context.Context, time.Time) error) *replica {
	t.Helper()
	if db == nil {
		var err error
		db, err = store.Open(t.Context(), filepath.Join(t.TempDir(), "agora.db"), keptMigrations)
		must(t, err)
		t.Cleanup(func() { db.Close() })
	}
	r := startReplica(t, db, ca)
	r.reg.Uploads = &DBUploads{DB: db, Blobs: bucket, Replicated: replicated}
	return r
}

// restoreKept is restoreDB with the kept uploads' table.
func restoreKept(t *testing.T, db *store.DB) *store.DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "agora.db")
	_, err := db.SQL().Exec(`VACUUM INTO ?`, path)
	must(t, err)
	copy, err := store.Open(t.Context(), path, keptMigrations)
	must(t, err)
	t.Cleanup(func() { copy.Close() })
	return copy
}

// TestKeptUpload_ReachesTheNewLeader: a worker's result uploaded to the leader is
// answered only once it is kept beyond the leader's disk (the bucket, a row in agora.db, the
// replica holding it). The leader dies right after answering; the worker, told its upload
// is stored, exits. The replica that takes over, restored from agora.db's replica, puts the
// kept upload in its own out directory at the take-back: the result is not lost. The same
// bytes again are answered 204 there, other bytes 409.
func TestKeptUpload_ReachesTheNewLeader(t *testing.T) {
	bucket, err := blob.Open(t.TempDir())
	must(t, err)
	var waits atomic.Int32
	old := keepingReplica(t, nil, nil, bucket, func(context.Context, time.Time) error { waits.Add(1); return nil })
	l := stageLayout(t, "01KEPTUPLOAD")
	spec := l.podSpec(t)
	s, err := old.reg.Export(t.Context(), spec)
	must(t, err)
	defer s.Close()
	put := remote.RoutePrefix + l.id + "/mounts/out"
	upload := tarOf(t, tarEntry{name: "result.json", body: `{"status":"ok"}`}, tarEntry{name: "patch.diff", body: "+kept\n"})
	if code, msg := old.do(t, "PUT", put, s.Token, bytes.NewReader(upload)); code != 204 {
		t.Fatalf("the upload to the leader: %d %q", code, msg)
	}
	if waits.Load() != 1 {
		t.Errorf("the upload was answered after %d waits for the replica, want 1", waits.Load())
	}

	// The leader dies; its disk with it. The standby restores agora.db and takes over.
	restored := restoreKept(t, old.db)
	old.gw.close()
	next := keepingReplica(t, restored, old.gw, bucket, nil)
	must(t, os.RemoveAll(l.out))
	must(t, os.Mkdir(l.out, 0o700))
	taken, err := next.reg.Reattach(t.Context(), l.podSpec(t))
	must(t, err)
	defer taken.Close()
	for name, want := range map[string]string{"result.json": `{"status":"ok"}`, "patch.diff": "+kept\n"} {
		if b, err := os.ReadFile(filepath.Join(l.out, name)); err != nil || string(b) != want {
			t.Errorf("%s in the new leader's out directory: %q %v, want the upload kept on the old one", name, b, err)
		}
	}
	if code, msg := next.do(t, "PUT", put, s.Token, bytes.NewReader(upload)); code != 204 {
		t.Errorf("the worker's retry of the same bytes at the new leader: %d %q, want 204", code, msg)
	}
	other := tarOf(t, tarEntry{name: "result.json", body: `{"status":"ok","forged":true}`})
	if code, _ := next.do(t, "PUT", put, s.Token, bytes.NewReader(other)); code != 409 {
		t.Errorf("other bytes after the kept upload: %d, want 409", code)
	}
	if b, _ := os.ReadFile(filepath.Join(l.out, "result.json")); string(b) != `{"status":"ok"}` {
		t.Errorf("result.json after a refused upload: %q", b)
	}
}

// TestKeptUpload_NotAnsweredBeforeTheReplica: while agora.db's replica does not hold the kept
// row, the upload is answered 503 (the worker retries, nothing is final: its mark stays
// placing), and the same bytes finish it once the replica catches up. An upload with no
// replica to wait for (a home that does not replicate) keeps nothing.
func TestKeptUpload_NotAnsweredBeforeTheReplica(t *testing.T) {
	bucket, err := blob.Open(t.TempDir())
	must(t, err)
	var behind atomic.Bool
	behind.Store(true)
	g := keepingReplica(t, nil, nil, bucket, func(context.Context, time.Time) error {
		if behind.Load() {
			return errors.New("the replica is behind")
		}
		return nil
	})
	l := stageLayout(t, "01KEPTBEHIND")
	s, err := g.reg.Export(t.Context(), l.podSpec(t))
	must(t, err)
	defer s.Close()
	put := remote.RoutePrefix + l.id + "/mounts/out"
	upload := tarOf(t, tarEntry{name: "result.json", body: `{"status":"ok"}`})
	if code, msg := g.do(t, "PUT", put, s.Token, bytes.NewReader(upload)); code != 503 {
		t.Fatalf("an upload whose row the replica does not hold: %d %q, want 503", code, msg)
	}
	sd, _ := sessionDir(g.reg.Dir, l.id)
	if m, err := readUploadMark(sd, "out"); err != nil || !m.Placing {
		t.Errorf("the mark after the refused keep: %+v %v, want placing", m, err)
	}
	if code, _ := g.do(t, "PUT", put, s.Token, bytes.NewReader(tarOf(t, tarEntry{name: "result.json", body: "other"}))); code != 409 {
		t.Errorf("other bytes while the first are placing: %d, want 409", code)
	}
	behind.Store(false)
	if code, msg := g.do(t, "PUT", put, s.Token, bytes.NewReader(upload)); code != 204 {
		t.Fatalf("the same bytes once the replica caught up: %d %q, want 204", code, msg)
	}
	if _, b, err := g.reg.Uploads.KeptUpload(t.Context(), l.id, "out"); err != nil || !bytes.Equal(b, upload) {
		t.Errorf("the kept upload: %d bytes, %v; want the body as it came", len(b), err)
	}
	if ents, _ := filepath.Glob(filepath.Join(sd, "kept-*")); len(ents) != 0 {
		t.Errorf("the bodies kept on the way are left in the session directory: %v", ents)
	}
}

// TestKeptUpload_GoesWithItsSession: a kept upload's row goes when its session does (the
// dispatch's end, a revocation, a re-export under a new token), so a takeover after that
// restores nothing; and a keep for a session that no longer stands is refused.
func TestKeptUpload_GoesWithItsSession(t *testing.T) {
	bucket, err := blob.Open(t.TempDir())
	must(t, err)
	g := keepingReplica(t, nil, nil, bucket, nil)
	l := stageLayout(t, "01KEPTGOES")
	s, err := g.reg.Export(t.Context(), l.podSpec(t))
	must(t, err)
	put := remote.RoutePrefix + l.id + "/mounts/out"
	if code, msg := g.do(t, "PUT", put, s.Token, bytes.NewReader(tarOf(t, tarEntry{name: "result.json", body: "{}"}))); code != 204 {
		t.Fatalf("upload: %d %q", code, msg)
	}
	if _, _, err := g.reg.Uploads.KeptUpload(t.Context(), l.id, "out"); err != nil {
		t.Fatalf("kept upload before the session's end: %v", err)
	}
	must(t, s.Close())
	if _, _, err := g.reg.Uploads.KeptUpload(t.Context(), l.id, "out"); !errors.Is(err, ErrNoUpload) {
		t.Errorf("kept upload after the session closed: %v, want none", err)
	}
	err = g.reg.Uploads.KeepUpload(t.Context(), l.id, hashToken(s.Token), "out", hashOf([]byte("x")), []byte("x"))
	if !errors.Is(err, ErrNoSession) {
		t.Errorf("keeping an upload of a closed session: %v, want ErrNoSession", err)
	}
}

// TestKeptUpload_ForgedRowRefusesTheTakeBack: what the take-back reads from the bucket is
// checked against the row: a row naming a blob the bucket lacks, a row whose size is not its
// blob's, and a blob whose bytes were swapped in the bucket under its name each fail the
// take-back (the dispatch then ends lost), never put unchecked bytes in the out directory.
// (agora.db itself is the replica's authority, as for every other row.)
func TestKeptUpload_ForgedRowRefusesTheTakeBack(t *testing.T) {
	forged := tarOf(t, tarEntry{name: "result.json", body: `{"forged":true}`})
	for name, forge := range map[string]func(t *testing.T, db *store.DB, bucketDir, sum string){
		"a blob the bucket lacks": func(t *testing.T, db *store.DB, _, _ string) {
			_, err := db.SQL().Exec(`UPDATE gateway_uploads SET sha256 = ?`, hashOf(forged))
			must(t, err)
		},
		"another size": func(t *testing.T, db *store.DB, _, _ string) {
			_, err := db.SQL().Exec(`UPDATE gateway_uploads SET size = size + 512`)
			must(t, err)
		},
		"bytes swapped in the bucket": func(t *testing.T, _ *store.DB, bucketDir, sum string) {
			p := filepath.Join(bucketDir, "sha256", sum[:2], sum)
			must(t, os.Chmod(p, 0o600))
			must(t, os.WriteFile(p, forged, 0o600))
		},
	} {
		t.Run(name, func(t *testing.T) {
			bucketDir := t.TempDir()
			bucket, err := blob.Open(bucketDir)
			must(t, err)
			old := keepingReplica(t, nil, nil, bucket, nil)
			l := stageLayout(t, "01KEPTFORGED")
			s, err := old.reg.Export(t.Context(), l.podSpec(t))
			must(t, err)
			defer s.Close()
			upload := tarOf(t, tarEntry{name: "result.json", body: "{}"})
			if code, msg := old.do(t, "PUT", remote.RoutePrefix+l.id+"/mounts/out", s.Token, bytes.NewReader(upload)); code != 204 {
				t.Fatalf("upload: %d %q", code, msg)
			}
			restored := restoreKept(t, old.db)
			forge(t, restored, bucketDir, hashOf(upload))
			old.gw.close()
			next := keepingReplica(t, restored, old.gw, bucket, nil)
			must(t, os.RemoveAll(l.out))
			must(t, os.Mkdir(l.out, 0o700))
			if taken, err := next.reg.Reattach(t.Context(), l.podSpec(t)); err == nil {
				taken.Close()
				t.Fatal("a kept upload that is not what its row names was taken back")
			}
			if ents, _ := os.ReadDir(l.out); len(ents) != 0 {
				t.Errorf("the refused take-back left %d entries in the out directory", len(ents))
			}
		})
	}
}

func hashOf(b []byte) string { return digest.Sum(b).Hex() }
