package worker

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestTrustWorkspaceRoot_GitWorksInAPodsWorkspace: a workspace whose own directory is
// another user's (a pod's emptyDir mount point is root's) while its contents are the agent's:
// git refuses it as of dubious ownership, and works with the agent's environment. A
// workspace of the agent's own gains no setting.
func TestTrustWorkspaceRoot_GitWorksInAPodsWorkspace(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("SKIP: git not installed: the test runs git's own ownership check")
	}
	if os.Geteuid() != 0 {
		t.Skip("SKIP: not root: the test gives the workspace's directory to another user")
	}
	ws := filepath.Join(t.TempDir(), "workspace")
	if err := os.Mkdir(ws, 0o777); err != nil {
		t.Fatal(err)
	}
	gitIn := func(dir string, env map[string]string, args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "GIT_CONFIG_NOSYSTEM=1", "LANG=C"}
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	git := func(env map[string]string, args ...string) (string, error) { return gitIn(ws, env, args...) }
	if out, err := git(nil, "init", "-q"); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}

	own := map[string]string{}
	trustWorkspaceRoot(own, ws)
	if len(own) != 0 {
		t.Errorf("a workspace of the agent's own gained settings: %v", own)
	}

	if err := os.Chown(ws, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	if out, err := git(nil, "status", "--short"); err == nil || !strings.Contains(out, "dubious ownership") {
		t.Fatalf("git status in a workspace whose directory is another user's: %v %s; want refused as of dubious ownership", err, out)
	}
	env := map[string]string{"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "user.name", "GIT_CONFIG_VALUE_0": "bundle"}
	trustWorkspaceRoot(env, ws)
	want := map[string]string{"GIT_CONFIG_COUNT": "2", "GIT_CONFIG_KEY_0": "user.name", "GIT_CONFIG_VALUE_0": "bundle",
		"GIT_CONFIG_KEY_1": "safe.directory", "GIT_CONFIG_VALUE_1": ws}
	if !maps.Equal(env, want) {
		t.Errorf("env %v, want %v: the bundle's pair kept, the workspace's exact path after it", env, want)
	}
	if out, err := git(env, "status", "--short"); err != nil {
		t.Errorf("git status with the agent's environment: %v\n%s", err, out)
	}
	// Only the workspace itself: a repository beside it, as foreign, is still refused.
	other := ws + "-other"
	if err := os.Mkdir(other, 0o777); err != nil {
		t.Fatal(err)
	}
	if out, err := gitIn(other, nil, "init", "-q"); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	if err := os.Chown(other, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	if out, err := gitIn(other, env, "status"); err == nil || !strings.Contains(out, "dubious ownership") {
		t.Errorf("git status beside the workspace: %v %s; want refused as of dubious ownership", err, out)
	}
}
