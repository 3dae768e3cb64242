package workspace_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/digest"
	"github.com/agora-dev/agora/internal/workspace"
)

// Repo is a real repository for tests: main (two commits), release/1 and feature/x branched
// from main, the annotated tag v1.0 on main's first commit, and a commit on feature/x only.
type Repo struct {
	Dir                                string
	Main, MainParent, Release, Feature string
	Dangling                           string // a commit no ref reaches
}

func requireGit(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("SKIP: git not installed; workspaces resolve revisions with it")
	}
}

func run(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false"}, args...)...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func newRepo(t testing.TB) Repo {
	t.Helper()
	requireGit(t)
	dir := filepath.Join(t.TempDir(), "app")
	os.MkdirAll(dir, 0o755)
	run(t, dir, "init", "-q", "-b", "main")
	commit := func(file string) string {
		os.WriteFile(filepath.Join(dir, file), []byte(file), 0o644)
		run(t, dir, "add", file)
		run(t, dir, "commit", "-q", "-m", file)
		return run(t, dir, "rev-parse", "HEAD")
	}
	r := Repo{Dir: dir}
	r.MainParent = commit("a")
	run(t, dir, "tag", "-a", "-m", "v1.0", "v1.0")
	r.Main = commit("b")
	run(t, dir, "checkout", "-q", "-b", "release/1")
	r.Release = commit("c")
	run(t, dir, "checkout", "-q", "-b", "feature/x", "main")
	r.Feature = commit("d")
	run(t, dir, "checkout", "-q", "-b", "scratch", "main")
	r.Dangling = commit("e")
	run(t, dir, "checkout", "-q", "main")
	run(t, dir, "branch", "-q", "-D", "scratch")
	return r
}

func ws(r Repo, patterns ...string) workspace.Workspace {
	return workspace.Workspace{Name: "app", Digest: digest.Digest("sha256:" + strings.Repeat("0", 64)),
		Doc: catalog.WorkspaceDoc{Repo: r.Dir, Revisions: patterns}}
}

func TestResolve(t *testing.T) {
	r := newRepo(t)
	app := ws(r, "main", "release/*", "v*")
	tests := []struct {
		name    string
		w       workspace.Workspace
		rev     string
		want    string
		wantErr string
	}{
		{"default is the first plain pattern", app, "", r.Main, ""},
		{"branch", app, "main", r.Main, ""},
		{"branch under a pattern", app, "release/1", r.Release, ""},
		{"annotated tag peels to its commit", app, "v1.0", r.MainParent, ""},
		{"commit an allowed branch reaches", app, r.MainParent, r.MainParent, ""},
		{"uppercase commit", app, strings.ToUpper(r.Release), r.Release, ""},
		{"branch outside the patterns", app, "feature/x", "", `workspace "app": revision "feature/x" is not allowed; allowed revisions: main, release/*, v*`},
		{"commit only a forbidden branch reaches", app, r.Feature, "", "is not reachable from any branch or tag the workspace allows"},
		{"commit no ref reaches", app, r.Dangling, "", "is not reachable from any branch or tag the workspace allows"},
		{"unknown commit", app, strings.Repeat("1", 40), "", "is not a commit of the workspace's repository"},
		{"allowed but absent", app, "release/2", "", "is neither a branch nor a tag"},
		{"pattern does not cross a slash", ws(r, "main", "release/*"), "release/1/x", "", "is not allowed"},
		{"rev syntax", app, "main~1", "", "holds '~'"},
		{"HEAD", app, "HEAD", "", "not a branch or tag name"},
		{"option", app, "--upload-pack=x", "", "holds '='"},
		{"path escape", app, "../x", "", "is not a branch, tag or full commit id"},
		{"reflog", app, "main@{1}", "", "holds '@'"},
		{"short commit", app, r.Main[:12], "", "is not allowed"},
		{"no default", ws(r, "release/*"), "", "", `workspace "app": no revision was given and the workspace has no default; name one; allowed revisions: release/*`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := workspace.Resolve(t.Context(), tt.w, tt.rev)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %q, %v; want an error containing %q", got, err, tt.wantErr)
				}
				if !errors.Is(err, workspace.ErrRevision) {
					t.Errorf("error %v does not match ErrRevision", err)
				}
				if strings.Contains(err.Error(), r.Dir) || strings.Contains(err.Error(), "/tmp") {
					t.Errorf("error names the repository path: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
	app.Doc.DefaultRevision = "release/1"
	if got, err := workspace.Resolve(t.Context(), app, ""); err != nil || got != r.Release {
		t.Errorf("default_revision: got %s, %v; want %s", got, err, r.Release)
	}
}

func TestCheckRepo(t *testing.T) {
	r := newRepo(t)
	if err := workspace.CheckRepo(t.Context(), r.Dir); err != nil {
		t.Fatal(err)
	}
	bare := filepath.Join(t.TempDir(), "bare.git")
	run(t, filepath.Dir(bare), "clone", "-q", "--bare", r.Dir, bare)
	if err := workspace.CheckRepo(t.Context(), bare); err != nil {
		t.Errorf("bare repository: %v", err)
	}
	sub := filepath.Join(r.Dir, "sub")
	os.Mkdir(sub, 0o755)
	plain := t.TempDir()
	file := filepath.Join(plain, "f")
	os.WriteFile(file, nil, 0o644)
	for _, bad := range []string{sub, plain, file, filepath.Join(plain, "absent")} {
		if err := workspace.CheckRepo(context.Background(), bad); err == nil {
			t.Errorf("CheckRepo(%s) accepted it", bad)
		}
	}
}
