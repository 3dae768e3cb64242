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
// answer with it: a tag's id peels to another.
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
