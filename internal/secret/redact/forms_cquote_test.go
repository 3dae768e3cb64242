package redact

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGitQuotedPathMasked: a secret with non-ASCII bytes used as a file name reaches a patch
// in git's quoted form; it is masked like the raw value.
func TestGitQuotedPathMasked(t *testing.T) {
	secret := "Geheim-Schlüssel-\"x\"\t0123"
	r := New([][]byte{[]byte(secret)})
	quoted := `diff --git "a/Geheim-Schl\303\274ssel-\"x\"\t0123" "b/..."`
	if got := r.String(quoted); strings.Contains(got, `Schl\303\274ssel`) {
		t.Errorf("quoted form not masked: %s", got)
	}
	// And it is what git really writes.
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("SKIP: git not installed: the form is checked against a literal only")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, secret), []byte("x\n"), 0o600); err != nil {
		t.Skipf("SKIP: this file system refuses the name: %v", err)
	}
	git := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "core.quotePath=true"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	git("init", "-q")
	git("add", "-A")
	patch := git("diff", "--cached")
	if !strings.Contains(patch, `\303\274`) {
		t.Fatalf("git did not quote the name:\n%s", patch)
	}
	if got := r.String(patch); strings.Contains(got, "Schl") {
		t.Errorf("git's patch still names the secret after redaction:\n%s", got)
	}
}
