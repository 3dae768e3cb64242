package home_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/agoradb"
	"github.com/agora-dev/agora/internal/home"
)

// TestRedTeam35_HomeBelowAnFSGroupVolume: in deploy/kubernetes the home is a directory below
// a volume root the kubelet made setgid and group-writable (fsGroup). Attack 1: what agora
// init makes there inherits the group; none of it may be readable by that group. Attack 2:
// the kubelet's recursive fsGroup walk (fsGroupChangePolicy Always, or OnRootMismatch once the
// root no longer matches) adds group rw to every file and group rwx plus setgid to every
// directory; agora must then refuse the home rather than run with its keys group-readable.
func TestRedTeam35_HomeBelowAnFSGroupVolume(t *testing.T) {
	root := t.TempDir()
	if err := os.Chmod(root, 0o2770); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "home")
	if _, err := home.Init(t.Context(), dir, agoradb.Migrations()); err != nil {
		t.Fatal(err)
	}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o077 != 0 && !strings.HasPrefix(d.Name(), "agora.db-") {
			t.Errorf("%s has mode %04o below a setgid volume root", p, fi.Mode().Perm())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// The kubelet's walk (pkg/volume/volume_linux.go): files g+rw, directories g+rwx and setgid.
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, _ := d.Info()
		mode := fi.Mode().Perm() | 0o060
		if d.IsDir() {
			mode |= 0o070 | fs.ModeSetgid
		}
		return os.Chmod(p, mode)
	})
	if err != nil {
		t.Fatal(err)
	}
	h, err := home.Open(t.Context(), dir, agoradb.Migrations())
	if err == nil {
		h.Close()
		t.Fatal("agora opened a home whose keys the volume's group may read")
	}
	if !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "chmod") {
		t.Errorf("the refusal does not name the home and the fix: %v", err)
	}
	// The hint followed for the directories alone: each key still refuses to load.
	for _, d := range []string{dir, filepath.Join(dir, home.KeyDir)} {
		if err := os.Chmod(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	h, err = home.Open(t.Context(), dir, agoradb.Migrations())
	if err != nil {
		if !strings.Contains(err.Error(), "mode") {
			t.Fatalf("Open with the directories fixed: %v", err)
		}
		t.Logf("refused at open: %v", err)
	} else {
		defer h.Close()
		if _, err := h.Sealer(); err == nil {
			t.Error("the sealing key loads with mode g+rw")
		}
		if _, err := h.AuditSigner(); err == nil {
			t.Error("the audit key loads with mode g+rw")
		}
		if _, err := h.CallbackKey(); err == nil {
			t.Error("the callback key loads with mode g+rw")
		}
	}
}
