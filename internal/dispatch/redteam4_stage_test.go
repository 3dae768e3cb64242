package dispatch_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/catalog/provision"
	"github.com/agora-dev/agora/internal/dispatch"
)

// TestRedTeam4_WorkspaceHoldsOnlyThePinnedHistory (the workspace clone):
// a workspace allows only main; the host repository also holds a branch, a tag and a blob no
// ref reaches, each with a secret. An agent inside the sandbox looks for them every way git
// offers (every object in the store, every ref, every object no ref reaches) and finds none:
// the workspace's .git holds exactly the objects the pinned commit reaches, and its history
// still works. Before the fix the workspace was a full clone: `git cat-file
// --batch-all-objects` printed all three secrets and `git tag` listed the excluded tag.
func TestRedTeam4_WorkspaceHoldsOnlyThePinnedHistory(t *testing.T) {
	e := newEnv(t)
	r := newWSRepo(t)
	// Secrets the workspace's allow-list excludes: a branch, a tag on a commit only it
	// reaches, and a blob no ref reaches at all.
	gitT(t, r.dir, "checkout", "-q", "-b", "private", "main")
	os.WriteFile(filepath.Join(r.dir, "KEY"), []byte("SECRET-ON-A-BRANCH\n"), 0o644)
	gitT(t, r.dir, "add", "KEY")
	gitT(t, r.dir, "commit", "-q", "-m", "SECRET-IN-A-MESSAGE")
	gitT(t, r.dir, "tag", "-a", "-m", "SECRET-IN-A-TAG", "private-tag")
	gitT(t, r.dir, "checkout", "-q", "main")
	hash := exec.Command("git", "hash-object", "-w", "--stdin")
	hash.Dir, hash.Stdin = r.dir, strings.NewReader("SECRET-NO-REF-REACHES\n")
	if out, err := hash.CombinedOutput(); err != nil {
		t.Fatalf("hash-object: %v: %s", err, out)
	}
	e.workspace("app", provision.WorkspaceSpec{Repo: r.dir, Revisions: []string{"main"}})
	e.subagent("digger", `echo "objects<$(git cat-file --batch-all-objects --batch | grep -a -c SECRET)>"; `+
		`echo "refs<$(git for-each-ref --format='%(refname)' | tr '\n' ' ')>"; `+
		`echo "tags<$(git tag | tr '\n' ' ')>"; `+
		`echo "unreached<$(git cat-file --batch-all-objects --batch-check='%(objectname)' | sort > /tmp/all; git rev-list --objects HEAD | cut -d' ' -f1 | sort > /tmp/reached; comm -23 /tmp/all /tmp/reached | wc -l)>"; `+
		`echo "log<$(git log --format=%s | tr '\n' ' ')>"; cat VERSION`)
	rec := e.run(dispatch.Request{Subagent: "digger", Workspace: "app"})
	wantFinished(t, rec)
	out := e.stdout(rec)
	for _, want := range []string{"objects<0>", "tags<>", "unreached<0>", "log<two one >", "two\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("inside the sandbox: want %q in\n%s", want, out)
		}
	}
	for _, leak := range []string{"private", "release", "feature"} {
		if strings.Contains(out, leak) {
			t.Errorf("the workspace names %q, which its allow-list excludes:\n%s", leak, out)
		}
	}
}
