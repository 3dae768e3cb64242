package workerbin

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkPin is what a dispatch pays to pin the worker: "fresh" is the first dispatch of a
// new worker build (read, build check, hash, copy), once per build and AGORA_HOME; "pinned"
// every later one in the same process (two stat calls and the index entry).
//
//	go test ./internal/workerbin -run '^$' -bench Pin -benchmem
func BenchmarkPin(b *testing.B) {
	src := filepath.Join(b.TempDir(), Name)
	body, err := os.ReadFile(workerBin)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(src, body, 0o755); err != nil {
		b.Fatal(err)
	}
	b.Run("fresh", func(b *testing.B) {
		for b.Loop() {
			p := &Pinner{Dir: filepath.Join(b.TempDir(), DirName)}
			if _, err := p.Pin(b.Context(), src, false); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("pinned", func(b *testing.B) {
		p := &Pinner{Dir: filepath.Join(b.TempDir(), DirName)}
		if _, err := p.Pin(b.Context(), src, false); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := p.Pin(b.Context(), src, false); err != nil {
				b.Fatal(err)
			}
		}
	})
}
