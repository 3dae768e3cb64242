package dispatch

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/catalog"
)

// TestCapabilityFiles_CountsEveryDirectory: what decides whether a capability's files fit
// the pinned tmpfs counts the directories on every entry's path, not only the entries. An
// attack registered 2000 empty files under chains of 17 directories (1 MiB stored, 36,000
// directories): counted by entries it went on the tmpfs, ran it out of inodes, and ended the
// dispatch integrity-failed where the stage directory's filesystem runs it.
func TestCapabilityFiles_CountsEveryDirectory(t *testing.T) {
	archive := func(paths ...string) []byte {
		t.Helper()
		slices.Sort(paths) // an archive's entries are in path order
		var files []catalog.File
		for _, p := range paths {
			files = append(files, catalog.File{Path: p, Mode: 0o644, Data: []byte{}})
		}
		b, err := catalog.Archive(files)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// Its directory, three entries, and a and a/b.
	if n := capabilityFiles(archive("a/b/c", "a/b/d", "e")); n != 6 {
		t.Errorf("capabilityFiles(a/b/c, a/b/d, e) = %d, want 6", n)
	}
	var deep []string
	for i := range 2000 {
		deep = append(deep, "d"+strconv.Itoa(i)+"/"+strings.Repeat("a/", 17)+"f")
	}
	stored := archive(deep...)
	if len(stored) > maxPinnedOnTmpfs {
		t.Fatalf("the deep tree is %d bytes stored: not the attack meant", len(stored))
	}
	if n := capabilityFiles(stored); n != 1+2000+2000*18 {
		t.Errorf("capabilityFiles(the deep tree) = %d, want %d", n, 1+2000+2000*18)
	}
	if n := capabilityFiles(stored); n <= pinnedTmpfsFiles {
		t.Errorf("the deep tree counts %d, within the pinned tmpfs's %d inodes", n, pinnedTmpfsFiles)
	}
	if n := capabilityFiles([]byte("not an archive")); n <= pinnedTmpfsFiles {
		t.Errorf("an archive that does not read counts %d: it must not fit", n)
	}
}
