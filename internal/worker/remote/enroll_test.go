package remote

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// A pool pod's worker reads its slot from the file its init step wrote, once: the file is
// gone after (the agent, later in the same container, finds no slot token), and a symlink
// planted there is not followed.
func TestSlotFromFile_ReadOnceNoSymlink(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "slot")
	if err := os.WriteFile(p, []byte(`{"slot":"s0123456789abcdef0123456789abcdef","token":"agw_0123456789abcdefghijklmnop"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := slotFromFile(p)
	if err != nil || a.Slot != "s0123456789abcdef0123456789abcdef" {
		t.Fatalf("slotFromFile = %+v, %v", a, err)
	}
	if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the slot file stays after the worker read it: %v", err)
	}
	target := filepath.Join(dir, "elsewhere")
	os.WriteFile(target, []byte(`{"slot":"s0123456789abcdef0123456789abcdef","token":"agw_0123456789abcdefghijklmnop"}`), 0o600)
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
	if _, err := slotFromFile(p); err == nil {
		t.Fatal("a symlinked slot file was followed")
	}
}
