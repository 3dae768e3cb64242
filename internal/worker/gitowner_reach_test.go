package worker

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestTrustWorkspaceRoot_TrustsNoOtherRepository: the safe.directory the worker names for a
// pod's workspace is its exact path: a foreign repository nested in the workspace, or reached
// through a symlink the agent leaves in it, is still refused as of dubious ownership, and an
// env bundle whose GIT_CONFIG_COUNT is no count (or names pairs past it) neither moves nor
// widens it.
func TestTrustWorkspaceRoot_TrustsNoOtherRepository(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("SKIP: git not installed: the test runs git's own ownership check")
	}
	if os.Geteuid() != 0 {
		t.Skip("SKIP: not root: the test gives repositories to another user")
	}
	dir := t.TempDir()
	ws := filepath.Join(dir, "workspace")
	gitIn := func(d string, env map[string]string, args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir = d
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "GIT_CONFIG_NOSYSTEM=1", "LANG=C"}
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	foreignRepo := func(d string) {
		t.Helper()
		if err := os.MkdirAll(d, 0o777); err != nil {
			t.Fatal(err)
		}
		if out, err := gitIn(d, nil, "init", "-q"); err != nil {
			t.Fatalf("git init %s: %v\n%s", d, err, out)
		}
		if err := filepath.Walk(d, func(p string, _ os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, 4242, 4242)
		}); err != nil {
			t.Fatal(err)
		}
	}
	foreignRepo(ws)
	foreignRepo(filepath.Join(ws, "nested"))
	foreignRepo(filepath.Join(dir, "other"))
	if err := os.Symlink(filepath.Join(dir, "other"), filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	for _, bundle := range []map[string]string{
		{},
		{"GIT_CONFIG_COUNT": "abc", "GIT_CONFIG_KEY_1": "safe.directory", "GIT_CONFIG_VALUE_1": "*"},
		{"GIT_CONFIG_COUNT": "1001", "GIT_CONFIG_KEY_0": "user.name", "GIT_CONFIG_VALUE_0": "bundle"},
		{"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "user.name", "GIT_CONFIG_VALUE_0": "bundle",
			"GIT_CONFIG_KEY_2": "safe.directory", "GIT_CONFIG_VALUE_2": "*"},
	} {
		env := map[string]string{}
		for k, v := range bundle {
			env[k] = v
		}
		refuseImplicitBareRepos(env)
		trustWorkspaceRoot(env, ws)
		if out, err := gitIn(ws, env, "status", "--short"); err != nil {
			t.Errorf("bundle %v: git status in the workspace: %v\n%s", bundle, err, out)
		}
		for _, d := range []string{filepath.Join(ws, "nested"), filepath.Join(ws, "link")} {
			if out, err := gitIn(d, env, "status"); err == nil || !strings.Contains(out, "dubious ownership") {
				t.Errorf("bundle %v: git status in %s: %v %s; want refused as of dubious ownership", bundle, d, err, out)
			}
		}
	}
}
