package provision_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/catalog/provision"
)

// text returns n bytes of lowercase words, spaces and newlines: varied like source text, and
// with no uppercase, digits or '-', so no credential pattern can match.
func text(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := 0; i < n; {
		word := 1 + r.IntN(10)
		for j := 0; j < word && i < n; j++ {
			b[i] = byte('a' + r.IntN(26))
			i++
		}
		if i < n {
			if r.IntN(8) == 0 {
				b[i] = '\n'
			} else {
				b[i] = ' '
			}
			i++
		}
	}
	return b
}

// BenchmarkRegisterCapability registers a 1,000-file, 20 MiB capability (read, grants,
// credential scan, archive, hash, blob write with fsync, transaction with audit entry). One
// file changes per iteration so every iteration stores a new version.
func BenchmarkRegisterCapability(b *testing.B) {
	f := newFixture(b)
	dir := b.TempDir()
	r := rand.New(rand.NewPCG(1, 2))
	const files, total = 1000, 20 << 20
	for i := range files {
		p := filepath.Join(dir, fmt.Sprintf("d%02d", i%50), fmt.Sprintf("f%04d.txt", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, text(r, total/files), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	b.SetBytes(total)
	for i := 0; b.Loop(); i++ {
		if err := os.WriteFile(filepath.Join(dir, "d00", "f0000.txt"), append(text(r, total/files-10), strconv.Itoa(i)...), 0o644); err != nil {
			b.Fatal(err)
		}
		p, err := f.w.PrepareCapability("big", dir, nil)
		if err != nil {
			b.Fatal(err)
		}
		c, _, err := f.w.Register(ctx, "bench", "register", p)
		if err != nil {
			b.Fatal(err)
		}
		if c.Action == catalog.ActionUnchanged {
			b.Fatal("iteration registered nothing new")
		}
	}
}

// seedVersions stores names x versions env bundles through the real Plan and Apply, one batch
// per round of versions.
func seedVersions(b *testing.B, f *fixture, names, versions int) {
	b.Helper()
	ctx := context.Background()
	for v := range versions {
		pendings := make([]*provision.Pending, 0, names)
		for n := range names {
			p, err := f.w.PrepareEnv(fmt.Sprintf("env-%05d", n), map[string]string{"VERSION": strconv.Itoa(v), "REGION": "eu-west-1"}, nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			pendings = append(pendings, p)
		}
		changes, err := f.w.Plan(ctx, pendings, false)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := f.w.Apply(ctx, "bench", "apply", changes, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkList lists the latest version of every name in a catalog holding 10,000 versions.
func BenchmarkList(b *testing.B) {
	for _, shape := range []struct{ names, versions int }{{1000, 10}, {10000, 1}} {
		b.Run(fmt.Sprintf("names=%d/versions=%d", shape.names, shape.versions), func(b *testing.B) {
			f := newFixture(b)
			seedVersions(b, f, shape.names, shape.versions)
			ctx := context.Background()
			for b.Loop() {
				list, err := f.r.List(ctx, catalog.KindEnv)
				if err != nil {
					b.Fatal(err)
				}
				if len(list) != shape.names {
					b.Fatalf("List = %d entries, want %d", len(list), shape.names)
				}
			}
		})
	}
}

// BenchmarkResolve resolves a name to its latest version in a catalog of 10,000 versions.
func BenchmarkResolve(b *testing.B) {
	f := newFixture(b)
	seedVersions(b, f, 1000, 10)
	ctx := context.Background()
	b.Run("name", func(b *testing.B) {
		for b.Loop() {
			v, err := f.r.Resolve(ctx, catalog.KindEnv, "env-00500")
			if err != nil || v.Name != "env-00500" {
				b.Fatal(v, err)
			}
		}
	})
	v, err := f.r.Resolve(ctx, catalog.KindEnv, "env-00500")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("pinned", func(b *testing.B) {
		for b.Loop() {
			if _, err := f.r.Resolve(ctx, catalog.KindEnv, "env-00500@"+string(v.Digest)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
