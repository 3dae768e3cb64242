// Package workspace resolves what a dispatch or a plan asks of a workspace (a catalog entry,
// [catalog.WorkspaceDoc]) to a commit of its repository: a ref name that one of the
// workspace's revision patterns allows, or a commit id reachable from such a ref.
//
// It runs on the host side and runs git there, with the user's and the system's
// configuration, hooks, the fsmonitor and replace refs switched off, and never hands git a
// string it could read as revision syntax or an option: revisions are parsed first
// ([catalog.ParseRevision]) and only full ref names (refs/heads/R, refs/tags/R, looked up
// exactly: [gitexec.RefCommit]) and full commit ids reach it. Its errors are meant for the
// caller who named the workspace, an AI among them: they name the workspace and its allowed
// patterns, and MUST NOT name the repository's path.
package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/digest"
	"github.com/agora-dev/agora/internal/gitexec"
)

// Workspace is one version of a workspace from the catalog.
type Workspace struct {
	Name   string
	Digest digest.Digest
	Doc    catalog.WorkspaceDoc
}

// Ref is NAME@sha256:HEX, what a dispatch record keeps.
func (w Workspace) Ref() string { return w.Name + "@" + string(w.Digest) }

// Reader is the catalog read side Lookup needs (a *view.Catalog).
type Reader interface {
	Resolve(ctx context.Context, kind catalog.Kind, ref string) (catalog.Version, error)
	// ResolveCurrent is Resolve refusing a pinned version that is not its name's current one
	// (view.Catalog.ResolveCurrent).
	ResolveCurrent(ctx context.Context, kind catalog.Kind, ref string) (catalog.Version, error)
	Content(v catalog.Version) ([]byte, error)
}

// Lookup finds the workspace ref names (NAME or NAME@sha256:HEX), any version ever registered.
// An unknown name is the catalog's not-found error, which lists the known workspaces.
func Lookup(ctx context.Context, r Reader, ref string) (Workspace, error) {
	return lookup(ctx, r, r.Resolve, ref)
}

// LookupCurrent is [Lookup] for a caller that starts new work on the workspace as people
// registered it now (an MCP client, a plan): a pinned version is refused unless it is the
// workspace's current one (view.Catalog.ResolveCurrent), so neither a superseded version (its
// wider revision patterns, its other repository) nor a retired workspace starts anything.
// Work that inherits its version (a resumed dispatch's child, a run's tasks) uses Lookup.
func LookupCurrent(ctx context.Context, r Reader, ref string) (Workspace, error) {
	return lookup(ctx, r, r.ResolveCurrent, ref)
}

func lookup(ctx context.Context, r Reader, resolve func(context.Context, catalog.Kind, string) (catalog.Version, error), ref string) (Workspace, error) {
	v, err := resolve(ctx, catalog.KindWorkspace, ref)
	if err != nil {
		return Workspace{}, err
	}
	b, err := r.Content(v)
	if err != nil {
		return Workspace{}, err
	}
	doc, err := catalog.ParseWorkspaceDoc(b)
	if err != nil {
		return Workspace{}, fmt.Errorf("workspace %q: %w", v.Name, err)
	}
	return Workspace{Name: v.Name, Digest: v.Digest, Doc: doc}, nil
}

// RevisionError is a revision a workspace does not allow or its repository does not have.
// Its message names the workspace and its patterns, never the repository's path.
type RevisionError struct {
	Workspace string
	Revision  string // as asked; "" when none was given
	Patterns  []string
	Reason    string
}

func (e *RevisionError) Error() string {
	pats := strings.Join(e.Patterns, ", ")
	if e.Revision == "" {
		return fmt.Sprintf("workspace %q: %s; allowed revisions: %s", e.Workspace, e.Reason, pats)
	}
	return fmt.Sprintf("workspace %q: revision %q %s; allowed revisions: %s", e.Workspace, cut(e.Revision), e.Reason, pats)
}

// ErrRevision is matched by every [RevisionError].
var ErrRevision = errors.New("revision refused")

func (e *RevisionError) Is(target error) bool { return target == ErrRevision }

// DefaultRevision is what a request that names no revision gets: the workspace's
// default_revision, else its first pattern without a wildcard, else "" (the caller must name
// one).
func DefaultRevision(doc catalog.WorkspaceDoc) string {
	if doc.DefaultRevision != "" {
		return doc.DefaultRevision
	}
	for _, p := range doc.Revisions {
		if !catalog.IsRevisionWildcard(p) {
			return p
		}
	}
	return ""
}

// Resolve returns the commit id rev names in ws's repository, if ws allows it: a ref name
// matching one of ws's patterns (refs/heads/R, else refs/tags/R), or a full commit id that is
// an ancestor of (or is) a ref matching one. rev "" is [DefaultRevision]. A refusal is a
// [*RevisionError]; other errors (git cannot run) are not.
func Resolve(ctx context.Context, ws Workspace, rev string) (string, error) {
	refuse := func(asked, reason string) error {
		return &RevisionError{Workspace: ws.Name, Revision: asked, Patterns: ws.Doc.Revisions, Reason: reason}
	}
	if rev == "" {
		if rev = DefaultRevision(ws.Doc); rev == "" {
			return "", refuse("", "no revision was given and the workspace has no default; name one")
		}
	}
	r, err := catalog.ParseRevision(rev)
	if err != nil {
		return "", refuse(rev, "is not a branch, tag or full commit id: "+strings.TrimPrefix(err.Error(), fmt.Sprintf("revision %q ", rev)))
	}
	repo := ws.Doc.Repo
	if r.IsCommit() {
		// The id must be a commit's own: a tag's id peels (^{commit}) to another and is refused.
		if c, err := gitexec.Commit(ctx, repo, r.Commit); err != nil || c != r.Commit {
			return "", refuse(rev, "is not a commit of the workspace's repository")
		}
		refs, err := git(ctx, repo, "for-each-ref", "--format=%(refname)", "--contains", r.Commit, "refs/heads", "refs/tags")
		if err != nil {
			return "", fmt.Errorf("workspace %q: list the refs that contain %s: %w", ws.Name, r.Commit, err)
		}
		for _, ref := range strings.Split(refs, "\n") {
			name, ok := strings.CutPrefix(ref, "refs/heads/")
			if !ok {
				name, ok = strings.CutPrefix(ref, "refs/tags/")
			}
			if ok && catalog.MatchRevision(ws.Doc.Revisions, name) {
				return r.Commit, nil
			}
		}
		return "", refuse(rev, "is not reachable from any branch or tag the workspace allows")
	}
	if !catalog.MatchRevision(ws.Doc.Revisions, r.Name) {
		return "", refuse(rev, "is not allowed")
	}
	// RefCommit, not Commit: rev-parse would take an allowed name that no ref has, written
	// as git describe writes (release/x-gHEX), for any commit whose id starts with HEX.
	for _, full := range []string{"refs/heads/" + r.Name, "refs/tags/" + r.Name} {
		if c, err := gitexec.RefCommit(ctx, repo, full); err == nil {
			return c, nil
		}
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	return "", refuse(rev, "is neither a branch nor a tag of the workspace's repository")
}

// CheckRepo checks that repo is a directory holding a git repository of its own (its working
// tree's top or a bare repository), not merely a directory inside one.
func CheckRepo(ctx context.Context, repo string) error {
	fi, err := os.Stat(repo)
	if err != nil {
		return fmt.Errorf("repository %s: %w", repo, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("repository %s is not a directory", repo)
	}
	// GIT_CEILING_DIRECTORIES (set by git) stops discovery at repo, so a directory inside
	// another repository is not taken for one.
	if _, err := git(ctx, repo, "rev-parse", "--git-dir"); err != nil {
		return fmt.Errorf("repository %s is not a git repository", repo)
	}
	return nil
}

// git runs git in dir with everything from outside the repository that could run code or
// change answers switched off: the user's and the system's configuration, hooks, the
// fsmonitor, replace refs, prompts; discovery never leaves dir. It returns stdout, trimmed.
// Stderr is dropped: it may name the path, which errors here must not.
func git(ctx context.Context, dir string, args ...string) (string, error) {
	out, err := gitexec.Command(ctx, dir, args...).Output()
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

func cut(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
