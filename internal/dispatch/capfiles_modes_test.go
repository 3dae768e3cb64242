package dispatch

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestSetTreeDirModes: every directory of the tree gets the mode, files keep theirs, and a
// symlink (to a directory outside, or inside) is never followed: under `sandbox: none` the
// agent owns the layout and may plant one before removeWork makes it writable again.
func TestSetTreeDirModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "caps")
	outside := t.TempDir()
	if err := os.Chmod(outside, 0o751); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"a/b/c", "d"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "a", "f"), []byte("x"), 0o640); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"a/out": outside, "in": "a"} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	for _, mode := range []fs.FileMode{0o500, 0o700} {
		if err := setTreeDirModes(dir, mode); err != nil {
			t.Fatal(err)
		}
		for _, d := range []string{".", "a", "a/b", "a/b/c", "d"} {
			if fi, err := os.Lstat(filepath.Join(dir, d)); err != nil || fi.Mode().Perm() != mode {
				t.Errorf("mode %v: %s is %v (%v)", mode, d, fi.Mode().Perm(), err)
			}
		}
		if fi, err := os.Stat(filepath.Join(dir, "a", "f")); err != nil || fi.Mode().Perm() != 0o640 {
			t.Errorf("the file's mode changed: %v (%v)", fi.Mode().Perm(), err)
		}
		if fi, err := os.Stat(outside); err != nil || fi.Mode().Perm() != 0o751 {
			t.Errorf("the directory behind a symlink changed: %v (%v)", fi.Mode().Perm(), err)
		}
	}
	if err := setTreeDirModes(filepath.Join(dir, "in"), 0o500); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Lstat(filepath.Join(dir, "a")); fi.Mode().Perm() != 0o700 {
		t.Errorf("a symlink given as the tree was followed: a is %v", fi.Mode().Perm())
	}
	if err := setTreeDirModes(filepath.Join(dir, "gone"), 0o500); err != nil {
		t.Errorf("a missing tree: %v", err)
	}
}
