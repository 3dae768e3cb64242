package dispatch_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/catalog/provision"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// wsRepo is a real repository: main (two commits), release/1 and feature/x from main, the
// tag v1.0 on main's first commit, and a commit no ref reaches.
type wsRepo struct {
	dir                                      string
	main, mainParent, release, feature, gone string
}

func gitT(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"}, args...)...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func newWSRepo(t *testing.T) wsRepo {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "app")
	os.MkdirAll(dir, 0o755)
	gitT(t, dir, "init", "-q", "-b", "main")
	commit := func(content string) string {
		os.WriteFile(filepath.Join(dir, "VERSION"), []byte(content+"\n"), 0o644)
		gitT(t, dir, "add", "VERSION")
		gitT(t, dir, "commit", "-q", "-m", content)
		return gitT(t, dir, "rev-parse", "HEAD")
	}
	r := wsRepo{dir: dir}
	r.mainParent = commit("one")
	gitT(t, dir, "tag", "v1.0")
	r.main = commit("two")
	gitT(t, dir, "checkout", "-q", "-b", "release/1")
	r.release = commit("release")
	gitT(t, dir, "checkout", "-q", "-b", "feature/x", "main")
	r.feature = commit("feature")
	gitT(t, dir, "checkout", "-q", "-b", "scratch", "main")
	r.gone = commit("gone")
	gitT(t, dir, "checkout", "-q", "main")
	gitT(t, dir, "branch", "-q", "-D", "scratch")
	return r
}

func (e *env) workspace(name string, spec provision.WorkspaceSpec) {
	e.t.Helper()
	p, err := e.w.PrepareWorkspace(e.t.Context(), name, spec)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, _, err := e.w.Register(e.t.Context(), "test", "register", p); err != nil {
		e.t.Fatal(err)
	}
}

// TestAccept_Workspace dispatches against a workspace: a revision it allows is pinned to its
// commit and recorded with the workspace's version (the accepted audit entry too), and the
// worker sees that commit checked out. Everything else is refused before anything is recorded,
// naming the workspace and its patterns, never the repository's path.
func TestAccept_Workspace(t *testing.T) {
	e := newEnv(t)
	r := newWSRepo(t)
	e.workspace("app", provision.WorkspaceSpec{Repo: r.dir, Revisions: []string{"main", "release/*", "v*"}})
	e.workspace("docs", provision.WorkspaceSpec{Repo: r.dir, Revisions: []string{"release/*"}})
	e.subagent("cat", `cat VERSION; git log -1 --format=%H`)

	rec := e.run(dispatch.Request{Subagent: "cat", Workspace: "app"})
	if rec.State != lifecycle.DispatchFinished || !strings.HasPrefix(rec.Workspace, "app@sha256:") || rec.Revision != r.main || rec.Repo != r.dir {
		t.Fatalf("default revision: %s %s %q, workspace %q revision %q repo %q", rec.State, rec.Reason, rec.Detail, rec.Workspace, rec.Revision, rec.Repo)
	}
	if out := e.stdout(rec); out != "two\n"+r.main+"\n" {
		t.Errorf("the worker saw %q, want main's tree at %s", out, r.main)
	}
	var entry string
	if err := e.home.DB.SQL().QueryRow(`SELECT entry FROM audit_entries WHERE kind = 'dispatch.accepted' AND subject = ?`, "dispatch/"+rec.ID).Scan(&entry); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(entry, `"workspace":"`+rec.Workspace+`"`) || !strings.Contains(entry, `"revision":"`+r.main+`"`) || strings.Contains(entry, r.dir) {
		t.Errorf("accepted audit entry = %s, want the workspace and the commit, never the path", entry)
	}

	ok := []struct{ rev, want string }{
		{"release/1", r.release}, {"v1.0", r.mainParent}, {r.mainParent, r.mainParent}, {"main", r.main},
	}
	for _, tt := range ok {
		got, err := e.d.Accept(t.Context(), dispatch.Request{Subagent: "cat", Workspace: "app", Revision: tt.rev, Actor: "test"})
		if err != nil || got.Revision != tt.want {
			t.Errorf("revision %q: got %v, %v; want %s", tt.rev, got, err, tt.want)
		}
	}

	before, err := e.d.Records.List(t.Context(), dispatch.ListFilter{})
	if err != nil {
		t.Fatal(err)
	}
	refused := []struct {
		name    string
		req     dispatch.Request
		wantErr string
	}{
		{"outside the patterns", dispatch.Request{Workspace: "app", Revision: "feature/x"}, `workspace "app": revision "feature/x" is not allowed; allowed revisions: main, release/*, v*`},
		{"rev syntax", dispatch.Request{Workspace: "app", Revision: "main~1"}, `revision "main~1" is not a branch, tag or full commit id`},
		{"HEAD", dispatch.Request{Workspace: "app", Revision: "HEAD"}, "is not a branch, tag or full commit id"},
		{"option", dispatch.Request{Workspace: "app", Revision: "--upload-pack=x"}, "is not a branch, tag or full commit id"},
		{"path", dispatch.Request{Workspace: "app", Revision: "../x"}, "is not a branch, tag or full commit id"},
		{"unreachable commit", dispatch.Request{Workspace: "app", Revision: r.gone}, "is not reachable from any branch or tag the workspace allows"},
		{"commit of a forbidden branch", dispatch.Request{Workspace: "app", Revision: r.feature}, "is not reachable from any branch or tag the workspace allows"},
		{"no default", dispatch.Request{Workspace: "docs"}, `workspace "docs": no revision was given and the workspace has no default; name one; allowed revisions: release/*`},
		{"unknown workspace", dispatch.Request{Workspace: "nope"}, `workspace "nope" not found; known: app, docs`},
		{"path as name", dispatch.Request{Workspace: "../app"}, `invalid workspace name "../app"`},
		{"absolute path as name", dispatch.Request{Workspace: r.dir}, "invalid workspace name"},
		{"both", dispatch.Request{Workspace: "app", Repo: r.dir}, "a workspace or a repository, not both"},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			tt.req.Subagent, tt.req.Actor = "cat", "test"
			_, err := e.d.Accept(t.Context(), tt.req)
			var re *dispatch.RequestError
			if !errors.As(err, &re) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got %v, want a RequestError containing %q", err, tt.wantErr)
			}
			if tt.name != "absolute path as name" && tt.name != "both" && strings.Contains(err.Error(), r.dir) {
				t.Errorf("the refusal names the repository path: %v", err)
			}
		})
	}
	after, err := e.d.Records.List(t.Context(), dispatch.ListFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Errorf("refused requests left %d records", len(after)-len(before))
	}
}

// TestResume_InheritsWorkspace: the child of a dispatch that asked a question works on the
// same workspace version at the same commit, even after the branch moved on.
func TestResume_InheritsWorkspace(t *testing.T) {
	e := newEnv(t)
	r := newWSRepo(t)
	e.workspace("app", provision.WorkspaceSpec{Repo: r.dir, Revisions: []string{"main"}})
	e.subagent("asker", `if printf %s "$AGORA_INPUT_JSON" | grep -q agora_resume; then git log -1 --format=%H; else printf '{"question":"which?"}' > "$AGORA_OUT/`+wire.NeedsInputFile+`"; fi`)
	parent := e.run(dispatch.Request{Subagent: "asker", Workspace: "app"})
	if parent.State != lifecycle.DispatchNeedsInput {
		t.Fatalf("parent: %s %s %s", parent.State, parent.Reason, parent.Detail)
	}
	os.WriteFile(filepath.Join(r.dir, "VERSION"), []byte("three\n"), 0o644)
	gitT(t, r.dir, "commit", "-q", "-am", "three")
	req, err := e.d.ResumeRequest(t.Context(), parent, "this", dispatch.Answerer{Actor: "test", Via: dispatch.ViaCLI})
	if err != nil {
		t.Fatal(err)
	}
	child := e.run(req)
	if child.Workspace != parent.Workspace || child.Revision != parent.Revision || child.Revision != r.main || child.ParentID != parent.ID {
		t.Fatalf("child workspace %q at %q (parent %q at %q)", child.Workspace, child.Revision, parent.Workspace, parent.Revision)
	}
	if out := e.stdout(child); out != r.main+"\n" {
		t.Errorf("the resumed worker saw %q, want %s", out, r.main)
	}
}
