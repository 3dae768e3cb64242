package mcpserver_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/mcpserver"
)

// TestDiffstat_AgreesWithGit: the host's count of a patch equals git's own --numstat of the
// same change, for a patch made with the worker's diff flags. The change holds what a naive
// count gets wrong: removed lines that read "-- x" (so "--- x" in the patch) and added lines
// that read "++ y" ("+++ y"), a binary file, a mode change, a rename, a deletion, an empty
// new file and a last line without a newline.
func TestDiffstat_AgreesWithGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skipf("SKIP: the comparison needs git: %v", err)
	}
	dir := t.TempDir()
	git := func(args ...string) []byte {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return out
	}
	write := func(name, content string, mode os.FileMode) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	git("init", "-q")
	write("sql.txt", "-- a comment\nselect 1;\n-- another\nkeep\n", 0o644)
	write("c.txt", "x++\n++ y\nz\n", 0o644)
	write("run.sh", "echo hi\n", 0o644)
	write("old/name.txt", strings.Repeat("moved unchanged\n", 20), 0o644)
	write("gone.txt", "one\ntwo\nthree\n", 0o644)
	write("bin.dat", "\x00\x01\x02binary", 0o644)
	git("add", "-A")
	git("commit", "-q", "-m", "base")
	base := strings.TrimSpace(string(git("rev-parse", "HEAD^{tree}")))

	write("sql.txt", "select 2;\n-- another\nkeep\n--- new dashes\n", 0o644)
	write("c.txt", "x++\n+++ y\n++ y\n@@ not a hunk\nz", 0o644)
	write("run.sh", "echo hi\n", 0o755)
	if err := os.Rename(filepath.Join(dir, "old"), filepath.Join(dir, "new")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "gone.txt")); err != nil {
		t.Fatal(err)
	}
	write("bin.dat", "\x00\x03\x04binary, changed", 0o644)
	write("empty.txt", "", 0o644)
	write("diff.txt", "diff --git a/x b/x\n@@ -1 +1 @@\n-a\n+b\n", 0o644)
	git("add", "-A")
	flags := []string{"diff", "--cached", "--full-index", "--no-ext-diff", "--no-textconv", "--no-color", "--src-prefix=a/", "--dst-prefix=b/", base, "--"}
	patch := git(append([]string{flags[0], "--binary"}, flags[1:]...)...)
	numstat := git(append([]string{flags[0], "--numstat"}, flags[1:]...)...)

	var want mcpserver.Diffstat
	for line := range strings.Lines(string(numstat)) {
		f := strings.Fields(line)
		want.Files++
		add, _ := strconv.Atoi(f[0]) // "-" for a binary file: no lines
		del, _ := strconv.Atoi(f[1])
		want.Insertions += add
		want.Deletions += del
	}
	if want.Files != 8 {
		t.Fatalf("git counts %d files, the test expects 8:\n%s", want.Files, numstat)
	}
	if got := mcpserver.DiffstatForTest(patch); got != want {
		t.Errorf("diffstat = %+v, git --numstat = %+v\n%s", got, want, patch)
	}
	// The same patch cut anywhere never counts more than the whole.
	for n := 0; n < len(patch); n += 97 {
		d := mcpserver.DiffstatForTest(patch[:n])
		if d.Files > want.Files || d.Insertions > want.Insertions || d.Deletions > want.Deletions {
			t.Fatalf("the first %d bytes count %+v, more than the whole %+v", n, d, want)
		}
	}
	if !bytes.Contains(patch, []byte("GIT binary patch")) {
		t.Fatalf("the patch has no binary section:\n%s", patch)
	}
}
