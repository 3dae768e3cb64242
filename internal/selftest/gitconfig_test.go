package selftest_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestWriteGitConfig_IsLive: write-git-config's .git/config makes a plain git, one that
// does not switch the repository's programs off, write into the host's drop directory; so
// the row's blocked is agora's patch capture, not a program that plants nothing.
func TestWriteGitConfig_IsLive(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("SKIP: git not installed: the test runs git's own diff and filters")
	}
	dir := t.TempDir()
	ws, probe, out := filepath.Join(dir, "ws"), filepath.Join(dir, "probe"), filepath.Join(dir, "out")
	for _, d := range []string{ws, filepath.Join(probe, "drop"), out} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	git := func(args ...string) {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Dir, cmd.Env = ws, append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, b)
		}
	}
	git("init", "-q")
	git("commit", "-q", "--allow-empty", "-m", "base")
	sh := exec.Command("sh", "-c", `report() { :; }; . ./corpus/write-git-config.sh`)
	sh.Env = append(os.Environ(), "AGORA_WORKSPACE="+ws, "probe="+probe, "out="+out)
	sh.Dir, _ = os.Getwd()
	if b, err := sh.CombinedOutput(); err != nil {
		t.Fatalf("the program: %v: %s", err, b)
	}
	git("add", "-A")
	git("commit", "-q", "-m", "patch")
	if ents, _ := os.ReadDir(filepath.Join(probe, "drop")); len(ents) == 0 {
		t.Error("a plain git ran none of the programs the workspace's .git/config names")
	}
}
