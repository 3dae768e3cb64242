package s3_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/agoratest/s3test"
	"github.com/agora-dev/agora/internal/blob"
	"github.com/agora-dev/agora/internal/digest"
	"github.com/agora-dev/agora/internal/s3"
)

func TestBlobs_RoundTripAndTamper(t *testing.T) {
	srv := s3test.Shared(t)
	cfg := srv.Bucket(t, false)
	st := blob.OpenRemote(s3.Blobs{C: srv.Client(t, cfg)})
	a, err := st.Put([]byte("patch a"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := st.Put([]byte("patch b"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := st.Get(a, 0); err != nil || string(got) != "patch a" {
		t.Fatalf("got %q, %v", got, err)
	}
	if !st.Has(a) || st.Has(digest.Sum([]byte("never stored"))) {
		t.Error("Has disagrees with what was stored")
	}
	if _, err := st.Get(digest.Sum([]byte("never stored")), 0); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("missing blob: got %v, want ErrNotFound", err)
	}
	if _, err := st.Get(a, 3); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("a 7-byte blob under a 3-byte limit: got %v", err)
	}
	// Attack: an object in the bucket is altered, or swapped for another blob's bytes (on the
	// server's disk, as a bucket owner could). Both are refused on read, naming the bucket.
	objPath := func(d digest.Digest) string {
		return filepath.Join(srv.Dir, cfg.Bucket, "agora", "blobs", "sha256", d.Hex()[:2], d.Hex())
	}
	if err := os.WriteFile(objPath(a), []byte("patch A"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(objPath(b), append([]byte(nil), []byte("patch a")...), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, d := range []digest.Digest{a, b} {
		_, err := st.Get(d, 0)
		var ie *blob.IntegrityError
		if !errors.As(err, &ie) || !strings.Contains(err.Error(), "is corrupt") || !strings.Contains(err.Error(), cfg.Bucket) {
			t.Errorf("tampered blob %s: got %v, want an integrity error naming the bucket", d, err)
		}
	}
	// Putting the bytes again repairs the object (content addressing: the name is the hash).
	if _, err := st.Put([]byte("patch a")); err != nil {
		t.Fatal(err)
	}
	if got, err := st.Get(a, 0); err != nil || string(got) != "patch a" {
		t.Errorf("after a re-put: %q, %v", got, err)
	}
}
