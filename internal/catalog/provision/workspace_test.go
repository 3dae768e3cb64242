package provision_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/catalog/provision"
)

func gitRepo(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("SKIP: git not installed; a workspace must be a git repository")
	}
	dir := filepath.Join(t.TempDir(), "app")
	if out, err := exec.Command("git", "init", "-q", "-b", "main", dir).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	return dir
}

// TestPrepareWorkspace registers a workspace with its history and audit entry, and refuses
// what is not a repository, bad patterns and a default the patterns do not allow. The
// version's metadata never carries the repository path.
func TestPrepareWorkspace(t *testing.T) {
	f := newFixture(t)
	repo := gitRepo(t)
	ctx := t.Context()
	p, err := f.w.PrepareWorkspace(ctx, "app", provision.WorkspaceSpec{
		Repo: repo + "/.", Revisions: []string{"main", "release/*"}, Description: "the app",
	})
	if err != nil {
		t.Fatal(err)
	}
	before := f.auditCount(t)
	c, v, err := f.w.Register(ctx, "tester", "register", p)
	if err != nil {
		t.Fatal(err)
	}
	if c.Action != catalog.ActionCreate || v.Kind != catalog.KindWorkspace {
		t.Errorf("got %s %s, want create workspace", c.Action, v.Kind)
	}
	if got := f.auditKinds(t, before); len(got) != 1 || got[0] != "catalog.workspace.register workspace/app" {
		t.Errorf("audit = %q", got)
	}
	content, err := f.r.Content(v)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := catalog.ParseWorkspaceDoc(content)
	if err != nil || doc.Repo != repo {
		t.Errorf("stored repo %q (%v), want the clean absolute %q", doc.Repo, err, repo)
	}
	list, err := f.r.List(ctx, catalog.KindWorkspace)
	if err != nil || len(list) != 1 {
		t.Fatalf("list = %+v, %v", list, err)
	}
	if m := list[0].Meta; m.Description != "the app" || strings.Join(m.Revisions, ",") != "main,release/*" {
		t.Errorf("meta = %+v", m)
	}
	if raw := f.count(t, `SELECT COUNT(*) FROM catalog_versions WHERE kind = 'workspace' AND meta LIKE ?`, "%"+repo+"%"); raw != 0 {
		t.Errorf("the stored metadata holds the repository path")
	}

	plain := t.TempDir()
	sub := filepath.Join(repo, "sub")
	os.Mkdir(sub, 0o755)
	for _, tt := range []struct {
		name, wsName string
		spec         provision.WorkspaceSpec
		wantErr      string
	}{
		{"not a repository", "x", provision.WorkspaceSpec{Repo: plain, Revisions: []string{"main"}}, "is not a git repository"},
		{"inside a repository", "x", provision.WorkspaceSpec{Repo: sub, Revisions: []string{"main"}}, "is not a git repository"},
		{"absent", "x", provision.WorkspaceSpec{Repo: filepath.Join(plain, "nope"), Revisions: []string{"main"}}, "no such file"},
		{"no repo", "x", provision.WorkspaceSpec{Revisions: []string{"main"}}, "a repository is required"},
		{"no patterns", "x", provision.WorkspaceSpec{Repo: repo}, "no revision patterns"},
		{"rev syntax pattern", "x", provision.WorkspaceSpec{Repo: repo, Revisions: []string{"main^"}}, `revision pattern "main^" holds '^'`},
		{"default outside", "x", provision.WorkspaceSpec{Repo: repo, Revisions: []string{"main"}, DefaultRevision: "dev"}, "matches none of the revision patterns"},
		{"path in name", "../x", provision.WorkspaceSpec{Repo: repo, Revisions: []string{"main"}}, `invalid workspace name "../x"`},
		{"slash in name", "a/b", provision.WorkspaceSpec{Repo: repo, Revisions: []string{"main"}}, `invalid workspace name "a/b"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := f.w.PrepareWorkspace(ctx, tt.wsName, tt.spec); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}
