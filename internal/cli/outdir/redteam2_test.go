package outdir_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/cli/outdir"
)

// TestRedTeam2_PlantedTwinIsKept: a file planted in --to DIR with the bytes agora is about to
// write is accepted as agora's own, and stays its planter's.
//
// Attack: writeout.go treats "an existing file with exactly the bytes to write" as success, so
// that a rerun succeeds. It checks the type and the bytes only, not who owns the file, its
// mode or its link count. A local user who can create files in the directory the operator
// names but not replace the operator's files there (a sticky, world-writable directory such
// as `--to /tmp`, or a shared review directory with the sticky bit) and who can predict a
// patch or an output (they wrote the repository, or the agent's input) plants it in advance,
// mode 0666, owned by them. `agora orch patches RUN --to DIR` / `agora dispatch outputs ID
// --to DIR` then report "wrote DIR/x.patch" and exit 0, and the planter rewrites the file at
// leisure before the operator runs `git apply`; the sticky bit that protects a file agora
// created does not protect this one.
//
// Impact: the operator applies or reads content agora never wrote while agora said it wrote
// it; the promised 0600 mode does not hold either (the file stays 0666).
//
// Now: an existing file counts as agora's own only when it is ours, mode within 0600, with
// one link and the same bytes; the planted twin is refused, and one agora wrote is accepted.
func TestRedTeam2_PlantedTwinIsKept(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(dir, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o777|os.ModeSticky)
	patch := []byte("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n")
	d, err := outdir.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	// agora's own file from an earlier run: a rerun succeeds.
	if _, err := d.WriteFile("mine.patch", patch); err != nil {
		t.Fatal(err)
	}
	if _, err := d.WriteFile("mine.patch", patch); err != nil {
		t.Fatalf("a rerun refused agora's own file: %v", err)
	}
	for _, c := range []struct {
		name  string
		plant func(path string)
	}{
		{"wide mode", func(p string) { os.Chmod(p, 0o666) }},
		{"another owner", func(p string) {
			if os.Geteuid() != 0 {
				t.Skip("SKIP: chown to another user needs root")
			}
			os.Chown(p, 65534, 65534)
		}},
		{"a second link", func(p string) { os.Link(p, p+".link") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			planted := filepath.Join(dir, "task-"+strings.ReplaceAll(c.name, " ", "-")+".patch")
			if err := os.WriteFile(planted, patch, 0o600); err != nil {
				t.Fatal(err)
			}
			c.plant(planted)
			if path, err := d.WriteFile(filepath.Base(planted), patch); err == nil {
				t.Fatalf("agora accepted the planted %s as its own: %s", filepath.Base(planted), path)
			}
		})
	}
}
