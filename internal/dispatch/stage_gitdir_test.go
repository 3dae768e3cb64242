package dispatch_test

import (
	"os"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/catalog/provision"
	"github.com/agora-dev/agora/internal/dispatch"
)

// TestStage_GitDirNamesNoHostPath: the workspace's.git is the
// checkout's own and names no host path: no remote (git remote -v prints nothing), and no
// file under .git (config, logs, packed-refs, FETCH_HEAD, alternates, anything) holds the
// host repository's path, read from inside a real dispatch. git still works in it.
func TestStage_GitDirNamesNoHostPath(t *testing.T) {
	e := newEnv(t)
	repo := gitRepo(t, map[string]string{"README.md": "# repo\n"})
	runGit(t, repo, "branch", "other")
	capDir := t.TempDir()
	os.WriteFile(capDir+"/capability.yaml", []byte("commands: [\"sh -c **\"]\n"), 0o644)
	pc, err := e.w.PrepareCapability("shell", capDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.w.Register(t.Context(), "test", "register", pc); err != nil {
		t.Fatal(err)
	}
	// The host path appears only in the script's argument, which is not under .git.
	script := `echo "remotes<$(git remote -v)>"; echo "status<$(git status --porcelain)>"; ` +
		`echo "log<$(git log --format=%s -1)>"; ` +
		`echo "hits<$(grep -rlF -e "$0" .git)>"; echo "files<$(find .git -type f | wc -l)>"`
	p, err := e.w.PrepareSubagent(t.Context(), "looker", provision.SubagentSpec{
		Command: []string{"sh", "-c", script, repo}, Capabilities: []string{"shell"}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.w.Register(t.Context(), "test", "register", p); err != nil {
		t.Fatal(err)
	}
	r := e.run(dispatch.Request{Subagent: "looker", Repo: repo})
	wantFinished(t, r)
	out := e.stdout(r)
	for _, want := range []string{"remotes<>", "status<>", "log<commit>", "hits<>"} {
		if !strings.Contains(out, want) {
			t.Errorf("inside the sandbox: want %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, "files<0>") || !strings.Contains(out, "files<") {
		t.Errorf("the workspace has no .git to look in:\n%s", out)
	}
}
