package config_test

import (
	"crypto/sha256"
	"os"
	"path/filepath"
	"testing"

	"github.com/agora-dev/agora/internal/config"
)

// TestLoad_FileSum: a loaded configuration knows the digest of the very bytes it was parsed
// from (serve and the resident dispatcher compare agora.yaml to it), and a home
// without agora.yaml has the zero digest, as a missing file sums for them.
func TestLoad_FileSum(t *testing.T) {
	home := t.TempDir()
	c, err := config.Load(home)
	if err != nil {
		t.Fatal(err)
	}
	if c.FileSum() != [32]byte{} {
		t.Errorf("no agora.yaml: FileSum %x, want zero", c.FileSum())
	}
	src := []byte("resident: {idle: 5m}\n")
	path := filepath.Join(home, config.FileName)
	if err := os.WriteFile(path, src, 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err = config.Load(home); err != nil {
		t.Fatal(err)
	}
	// The file changes after the load: the digest stays that of what was parsed.
	if err := os.WriteFile(path, []byte("resident: {idle: 6m}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if c.FileSum() != sha256.Sum256(src) {
		t.Errorf("FileSum %x, want the digest of the bytes loaded %x", c.FileSum(), sha256.Sum256(src))
	}
}
