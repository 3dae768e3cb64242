package sandboxfs

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/agora-dev/agora/internal/blob"
	"github.com/agora-dev/agora/internal/capped"
	"github.com/agora-dev/agora/internal/secret/redact"
)

// BenchmarkCollect1000 collects 1,000 output files of 4 KiB the way reconcile does: read,
// redact, store as a blob (already present, so the store's hash and lookup are measured but
// not an fsync per file, which would hide everything else). "capped" is the plain collection
// (capped.NoFollow on the joined path, no hash check); "sandboxfs" resolves beneath
// the directory with no symlink on the path and checks each declared SHA-256. Target: at most
// 1.2x capped.
func BenchmarkCollect1000(b *testing.B) {
	out := b.TempDir()
	const n = 1000
	rels := make([]string, n)
	sums := make([]string, n)
	for i := range n {
		rels[i] = fmt.Sprintf("outputs/d%02d/f%04d.txt", i%50, i)
		content := make([]byte, 4<<10)
		rand.Read(content)
		p := filepath.Join(out, rels[i])
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, content, 0o600); err != nil {
			b.Fatal(err)
		}
		s := sha256.Sum256(content)
		sums[i] = hex.EncodeToString(s[:])
	}
	store, err := blob.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	red := redact.New([][]byte{[]byte("a-secret-value-of-some-length")})
	put := func(data []byte) {
		if _, err := store.Put(red.Bytes(data)); err != nil {
			b.Fatal(err)
		}
	}
	for _, rel := range rels { // the blobs exist before either is timed
		data, err := os.ReadFile(filepath.Join(out, rel))
		if err != nil {
			b.Fatal(err)
		}
		put(data)
	}
	b.Run("capped", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, rel := range rels {
				data, err := capped.NoFollow(filepath.Join(out, rel), 100<<20)
				if err != nil {
					b.Fatal(err)
				}
				put(data)
			}
		}
	})
	b.Run("sandboxfs", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			d, err := Open(out)
			if err != nil {
				b.Fatal(err)
			}
			for i, rel := range rels {
				data, err := d.ReadVerified(rel, 100<<20, sums[i])
				if err != nil {
					b.Fatal(err)
				}
				put(data)
			}
			d.Close()
		}
	})
}
