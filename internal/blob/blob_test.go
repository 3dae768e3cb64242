package blob_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/blob"
	"github.com/agora-dev/agora/internal/digest"
)

func openStore(t testing.TB) (*blob.Store, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "blobs")
	s, err := blob.Open(dir)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s, dir
}

func blobPath(dir string, d digest.Digest) string {
	return filepath.Join(dir, "sha256", d.Hex()[:2], d.Hex())
}

func TestStore_PutGet(t *testing.T) {
	s, dir := openStore(t)
	for _, content := range [][]byte{nil, []byte("hello"), bytes.Repeat([]byte{0, 1, 2, 255}, 1<<16)} {
		d, err := s.Put(content)
		if err != nil {
			t.Fatalf("Put: %v", err)
		}
		if want := digest.Sum(content); d != want {
			t.Errorf("Put digest = %s, want %s", d, want)
		}
		if !s.Has(d) {
			t.Errorf("Has(%s) = false after Put", d)
		}
		got, err := s.Get(d, 0)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		if !bytes.Equal(got, content) {
			t.Errorf("Get returned %d bytes, want %d", len(got), len(content))
		}
		fi, err := os.Stat(blobPath(dir, d))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o400 {
			t.Errorf("blob mode = %04o, want 0400", fi.Mode().Perm())
		}
		// Storing the same bytes again is a no-op.
		if d2, err := s.Put(content); err != nil || d2 != d {
			t.Errorf("second Put = %s, %v; want %s, nil", d2, err, d)
		}
	}
	leftovers, _ := filepath.Glob(filepath.Join(dir, "sha256", "*", ".tmp-*"))
	if len(leftovers) != 0 {
		t.Errorf("temporary files left behind: %v", leftovers)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("store dir mode = %v (%v), want 0700", fi.Mode().Perm(), err)
	}
}

func TestStore_GetDetectsCorruption(t *testing.T) {
	s, dir := openStore(t)
	d, err := s.Put([]byte("original content"))
	if err != nil {
		t.Fatal(err)
	}
	p := blobPath(dir, d)
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("tampered content"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(d, 0)
	var ie *blob.IntegrityError
	if !errors.As(err, &ie) {
		t.Fatalf("Get of a corrupted blob = %q, %v; want an IntegrityError", got, err)
	}
	want := &blob.IntegrityError{Want: d, Got: digest.Sum([]byte("tampered content"))}
	if diff := cmp.Diff(want, ie); diff != "" {
		t.Errorf("IntegrityError mismatch (-want +got):\n%s", diff)
	}
	if !strings.Contains(err.Error(), string(d)) || !strings.Contains(err.Error(), "corrupt") {
		t.Errorf("error %q does not name the blob or say it is corrupt", err)
	}
}

func TestStore_GetMaxSize(t *testing.T) {
	s, _ := openStore(t)
	content := bytes.Repeat([]byte("x"), 1000)
	d, err := s.Put(content)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(d, 999); err == nil || !strings.Contains(err.Error(), "1000 bytes, over the 999-byte limit") {
		t.Errorf("Get with maxSize 999 = %v, want a size refusal naming both sizes", err)
	}
	if got, err := s.Get(d, 1000); err != nil || len(got) != 1000 {
		t.Errorf("Get with maxSize 1000 = %d bytes, %v; want 1000 bytes", len(got), err)
	}
}

func TestStore_GetRefuses(t *testing.T) {
	s, _ := openStore(t)
	missing := digest.Sum([]byte("never stored"))
	if _, err := s.Get(missing, 0); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("Get of a missing blob = %v, want ErrNotFound", err)
	}
	if s.Has(missing) {
		t.Errorf("Has(missing) = true")
	}
	for _, bad := range []digest.Digest{"", "sha256:", "sha256:../../etc/passwd", "md5:" + digest.Digest(strings.Repeat("a", 64)),
		"sha256:" + digest.Digest(strings.Repeat("A", 64)), "sha256:" + digest.Digest(strings.Repeat("g", 64))} {
		if _, err := s.Get(bad, 0); err == nil || errors.Is(err, blob.ErrNotFound) {
			t.Errorf("Get(%q) = %v, want a malformed digest error", bad, err)
		}
	}
}

func TestStore_ConcurrentPutSameContent(t *testing.T) {
	s, dir := openStore(t)
	content := bytes.Repeat([]byte("same bytes from everyone\n"), 4096)
	const n = 16
	var wg sync.WaitGroup
	errs := make([]error, n)
	digests := make([]digest.Digest, n)
	for i := range n {
		wg.Go(func() {
			digests[i], errs[i] = s.Put(content)
		})
	}
	wg.Wait()
	want := digest.Sum(content)
	for i := range n {
		if errs[i] != nil || digests[i] != want {
			t.Errorf("Put %d = %s, %v; want %s", i, digests[i], errs[i], want)
		}
	}
	got, err := s.Get(want, 0)
	if err != nil || !bytes.Equal(got, content) {
		t.Errorf("Get after concurrent Puts = %d bytes, %v", len(got), err)
	}
	entries, err := os.ReadDir(filepath.Dir(blobPath(dir, want)))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("blob dir holds %v, want exactly the blob", names)
	}
}

func TestStore_ConcurrentPutDistinct(t *testing.T) {
	s, _ := openStore(t)
	var wg sync.WaitGroup
	const n = 32
	for i := range n {
		wg.Go(func() {
			if _, err := s.Put(fmt.Appendf(nil, "blob %d", i)); err != nil {
				t.Errorf("Put %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	for i := range n {
		c := fmt.Appendf(nil, "blob %d", i)
		if got, err := s.Get(digest.Sum(c), 0); err != nil || !bytes.Equal(got, c) {
			t.Errorf("Get %d = %q, %v", i, got, err)
		}
	}
}

// BenchmarkStore_Get reads a 10 KB blob (a capability archive's size) back and verifies it:
// a dispatch reads its subagent and capabilities five to seven times.
//
//	go test ./internal/blob -run '^$' -bench Get -benchmem
func BenchmarkStore_Get(b *testing.B) {
	s, _ := openStore(b)
	d, err := s.Put(bytes.Repeat([]byte("capability "), 1000))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := s.Get(d, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// TestPut_TouchesAnExistingBlob: storing bytes already present updates the blob's time (what
// a retention purge checks, internal/retention), and a blob renamed aside by a purge is
// written anew rather than reported present.
func TestPut_TouchesAnExistingBlob(t *testing.T) {
	dir := t.TempDir()
	s, err := blob.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	d, err := s.Put([]byte("again"))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "sha256", d.Hex()[:2], d.Hex())
	old := time.Now().Add(-48 * time.Hour)
	if err := os.Chtimes(p, old, old); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put([]byte("again")); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil || st.ModTime().Before(time.Now().Add(-time.Hour)) {
		t.Fatalf("the blob's time after a second Put: %v, %v", st.ModTime(), err)
	}
	if err := os.Rename(p, p+".purge"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put([]byte("again")); err != nil {
		t.Fatal(err)
	}
	if b, err := s.Get(d, 0); err != nil || string(b) != "again" {
		t.Fatalf("after a Put over a purge's rename: %q, %v", b, err)
	}
}
