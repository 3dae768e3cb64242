package codexadapter

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/toolreg/builtin"
)

// TestRedTeam32_CodexLearnCopiesNoProcFile (64e6710): an Update File outside
// the workspace makes the worker copy the original into the scratch directory, where the
// agent reads it. The worker is non-dumpable so that the agent (same uid) cannot read its
// /proc entries: its initial environment (/proc/self/environ keeps the gateway token and
// the proxy's password however the worker unsets them), its open files, its memory map. A
// patch naming /proc/self/environ, or a link the agent planted that leads there, must not
// have the worker copy its own /proc files out.
func TestRedTeam32_CodexLearnCopiesNoProcFile(t *testing.T) {
	ws := t.TempDir()
	scratch, err := builtin.NewScratch(t.TempDir(), ws)
	if err != nil {
		t.Fatal(err)
	}
	defer scratch.Close()
	p := &codexPatches{scratch: scratch, dir: ws}
	link := filepath.Join(t.TempDir(), "innocent.txt")
	if err := os.Symlink("/proc/self/environ", link); err != nil {
		t.Fatal(err)
	}
	for i, path := range []string{"/proc/self/environ", "/proc/self/cmdline", "/proc/self/maps", "/proc/" + itoa(os.Getpid()) + "/environ", link, "/sys/kernel/mm/transparent_hugepage/enabled"} {
		patch := "*** Begin Patch\n*** Update File: " + path + "\n@@\n-x\n+y\n*** End Patch\n"
		if _, err := p.learnPatch("call_"+itoa(i), patch, func(string, string) error { return nil }); err != nil {
			t.Fatalf("learn %s: %v", path, err)
		}
	}
	err = filepath.Walk(scratch.Dir(), func(path string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		b, _ := os.ReadFile(path)
		t.Errorf("the worker copied %s into the scratch (%d bytes: %.60q)", strings.TrimPrefix(path, scratch.Dir()), len(b), b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func itoa(n int) string {
	s := ""
	for {
		s = string(rune('0'+n%10)) + s
		if n /= 10; n == 0 {
			return s
		}
	}
}
