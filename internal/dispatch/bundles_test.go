package dispatch

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/digest"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// What a supervisor killed mid-stage leaves of a shared bundle (the entry it was writing, or
// one it had moved out of .bundles) lies in its own stage, never at the entry's path, and goes
// with the stage's work.
func TestBundleLeftoversGoWithTheStage(t *testing.T) {
	stateDir := t.TempDir()
	const id = "01M8198E9H3WJ6JTRTP9H0PHPV"
	s, err := newStage(stateDir, id, stageLimits{sandboxed: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{bundleStaging, bundleDiscard} {
		if err := os.MkdirAll(filepath.Join(s.dir, name, "capabilities"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(s.dir, name, "subagent.json"), []byte("{"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stageAt(stateDir, id).removeWork() // as Reap does, from the record alone
	for _, name := range []string{bundleStaging, bundleDiscard} {
		if _, err := os.Lstat(filepath.Join(s.dir, name)); !os.IsNotExist(err) {
			t.Errorf("%s after removeWork: %v, want it gone", name, err)
		}
	}
}

// The entry's name covers every file's path and digest, in order.
func TestBundleKey(t *testing.T) {
	a := []bundleFile{{rel: "subagent.json"}, {rel: "capabilities/x.tar"}}
	a[0].version.Digest, a[1].version.Digest = "sha256:01", "sha256:02"
	b := []bundleFile{a[1], a[0]}
	c := []bundleFile{a[0], {rel: "capabilities/y.tar", version: a[1].version}}
	if bundleKey(a) == bundleKey(b) || bundleKey(a) == bundleKey(c) || bundleKey(a) != bundleKey(append([]bundleFile(nil), a...)) {
		t.Errorf("keys: %s %s %s", bundleKey(a), bundleKey(b), bundleKey(c))
	}
}

// BenchmarkBundle compares what a dispatch does with its pinned catalog content: check a
// shared entry it reuses, or write the files into its own stage and later remove them (what
// every sandboxed dispatch did before entries were shared).
func BenchmarkBundle(b *testing.B) {
	dir := b.TempDir()
	sub, archive := make([]byte, 512), make([]byte, 4096)
	rand.Read(sub)
	rand.Read(archive)
	files := []bundleFile{
		{rel: wire.SubagentFile, version: catalog.Version{Digest: digest.Sum(sub)}},
		{rel: wire.CapabilityPath(digest.Sum(archive)), version: catalog.Version{Digest: digest.Sum(archive)}},
	}
	content := [][]byte{sub, archive}
	write := func(dir string, mode os.FileMode) {
		if err := os.MkdirAll(filepath.Join(dir, wire.CapabilitiesDir), 0o700); err != nil {
			b.Fatal(err)
		}
		for i, f := range files {
			if err := os.WriteFile(filepath.Join(dir, f.rel), content[i], mode); err != nil {
				b.Fatal(err)
			}
		}
	}
	entry := filepath.Join(dir, "entry")
	write(entry, 0o600)
	if err := os.WriteFile(filepath.Join(entry, wire.ManifestFile), nil, 0o600); err != nil {
		b.Fatal(err)
	}
	b.Run("check shared entry", func(b *testing.B) {
		for b.Loop() {
			if err := checkBundle(entry, files); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("write and remove own", func(b *testing.B) {
		own := filepath.Join(dir, "own")
		for b.Loop() {
			write(own, 0o600)
			if err := os.RemoveAll(own); err != nil {
				b.Fatal(err)
			}
		}
	})
}
