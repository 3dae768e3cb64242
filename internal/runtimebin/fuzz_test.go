package runtimebin

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzCheckRunnable feeds arbitrary bytes to the ELF check, which reads whatever file a person
// configures: it must answer with an error, never panic.
func FuzzCheckRunnable(f *testing.F) {
	if b, err := os.ReadFile("/usr/bin/true"); err == nil && len(b) < 1<<20 {
		f.Add(b)
	}
	f.Add([]byte("\x7fELF\x02\x01\x01"))
	f.Add([]byte("#!/usr/bin/env node\n"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(dir, "exe")
		if err := os.WriteFile(p, b, 0o755); err != nil {
			t.Fatal(err)
		}
		_, _ = checkRunnable(p)
		_ = isELF(p)
	})
}
