package gitexec

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// RefusedRevisionError is a revision refused before git sees it.
type RefusedRevisionError struct {
	Revision string
	Why      string
}

func (e *RefusedRevisionError) Error() string {
	return fmt.Sprintf("revision %q %s", e.Revision, e.Why)
}

// ErrNoCommit is matched by the error of a revision git does not resolve to a commit.
var ErrNoCommit = errors.New("no such commit")

// Commit returns the full id of the commit rev names in the repository at dir, asking git as
// [Command] runs it. It is the one place agora turns a revision into a commit: see
// [ResolveCommit] for what it accepts.
func Commit(ctx context.Context, dir, rev string) (string, error) {
	return ResolveCommit(rev, func(args ...string) ([]byte, error) {
		return Command(ctx, dir, args...).Output()
	})
}

// ResolveCommit is [Commit] with git run by run, for a caller whose git needs its own
// directory or environment (a private object store). It asks
//
//	git rev-parse --verify --quiet --end-of-options REV^{commit}
//
// rev comes from callers (a person, a plan, an AI over MCP), so it never reaches git as an
// option: one that is empty or starts with '-' (--upload-pack=..., --output=...) is refused
// first (a [*RefusedRevisionError]), and --end-of-options stops git reading whatever follows
// as one. ^{commit} peels a tag to its commit and makes a tree or a blob fail. The answer
// must be one full object id (40 or 64 lowercase hex digits); anything else, and any failure
// of git, is [ErrNoCommit]. Errors quote rev and never name the repository, whose path the
// caller of a workspace must not see. A caller that was handed a full commit id compares the
// answer with it: a tag's id peels to another. A caller that allows only some refs uses
// [RefCommit]: git takes a name it finds no ref for as an abbreviated id when it reads as
// git describe's output (NAME-gHEX is whatever object's id starts with HEX).
func ResolveCommit(rev string, run func(args ...string) ([]byte, error)) (string, error) {
	if rev == "" {
		return "", &RefusedRevisionError{Why: "is empty"}
	}
	if strings.HasPrefix(rev, "-") {
		return "", &RefusedRevisionError{Revision: rev, Why: "may not start with '-'"}
	}
	out, err := run("rev-parse", "--verify", "--quiet", "--end-of-options", rev+"^{commit}")
	if err != nil {
		return "", fmt.Errorf("revision %q: %w", rev, ErrNoCommit)
	}
	id := strings.TrimSpace(string(out))
	if !IsObjectID(id) {
		return "", fmt.Errorf("revision %q: git answered %d bytes, not an object id: %w", rev, len(out), ErrNoCommit)
	}
	return id, nil
}

// RefCommit returns the full id of the commit that the ref named exactly by ref (refs/heads/main,
// refs/tags/v1: a tag is peeled) points to in the repository at dir, asking git as [Command]
// runs it. Unlike [Commit] it reads no revision syntax and never falls back on an abbreviated
// id, so it is how a caller that allows only some refs turns one into a commit: rev-parse
// takes refs/heads/release/x-gHEX, which no ref has, for the object whose id starts with HEX,
// be it another branch's, the stash's or the reflog's. A ref that does not exist or names no
// commit is [ErrNoCommit]; one not below refs/ is a [*RefusedRevisionError].
func RefCommit(ctx context.Context, dir, ref string) (string, error) {
	if !strings.HasPrefix(ref, "refs/") {
		return "", &RefusedRevisionError{Revision: ref, Why: "is not a full ref name (refs/...)"}
	}
	out, err := Command(ctx, dir, "show-ref", "--verify", "--hash", "--end-of-options", ref).Output()
	if err != nil {
		return "", fmt.Errorf("ref %q: %w", ref, ErrNoCommit)
	}
	id := strings.TrimSpace(string(out))
	if !IsObjectID(id) {
		return "", fmt.Errorf("ref %q: git answered %d bytes, not an object id: %w", ref, len(out), ErrNoCommit)
	}
	c, err := Commit(ctx, dir, id)
	if err != nil {
		return "", fmt.Errorf("ref %q: %w", ref, ErrNoCommit)
	}
	return c, nil
}

// IsObjectID reports whether s is a full object id: 40 (SHA-1) or 64 (SHA-256) lowercase hex
// digits.
func IsObjectID(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
