package catalog

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strings"

	"github.com/agora-dev/agora/internal/jcs"
	"github.com/agora-dev/agora/internal/strictjson"
)

// Limits of a workspace.
const (
	// MaxRevisionPatterns caps a workspace's revision patterns.
	MaxRevisionPatterns = 64
	// MaxRevisionLen caps a revision or a revision pattern, in bytes.
	MaxRevisionLen = 255
	// maxWorkspaceDescription caps a workspace's description, in bytes.
	maxWorkspaceDescription = 1 << 10
	// maxRepoPath caps a workspace's repository path, in bytes.
	maxRepoPath = 4096
	// maxWorkspaceDoc caps the stored document.
	maxWorkspaceDoc = 64 << 10
)

// WorkspaceDoc is the stored, hashed form of a workspace: a repository on the host that
// orchestrators may name, and the revisions of it they may ask for. It is RFC 8785 JSON with
// exactly the keys repo, revisions and, when set, default_revision and description.
//
// The repository path MUST NOT leave the host side: [Meta] (what lists and MCP see) carries
// the revisions and the description, never Repo.
type WorkspaceDoc struct {
	Repo            string   `json:"repo"` // absolute and clean
	Revisions       []string `json:"revisions"`
	DefaultRevision string   `json:"default_revision,omitempty"`
	Description     string   `json:"description,omitempty"`
}

// Check reports every problem of d at once: the path is absolute and clean, every pattern is
// a [CheckRevisionPattern] pattern, named once, and the default revision is a revision that
// the patterns allow.
func (d WorkspaceDoc) Check() error {
	var problems []string
	switch {
	case d.Repo == "":
		problems = append(problems, "the repository path is empty")
	case len(d.Repo) > maxRepoPath || strings.ContainsRune(d.Repo, 0):
		problems = append(problems, "the repository path is not a plausible path")
	case !filepath.IsAbs(d.Repo) || filepath.Clean(d.Repo) != d.Repo:
		problems = append(problems, fmt.Sprintf("the repository path %q is not absolute and clean", d.Repo))
	}
	if len(d.Revisions) == 0 {
		problems = append(problems, "no revision patterns: name at least one (such as main or release/*)")
	}
	if len(d.Revisions) > MaxRevisionPatterns {
		problems = append(problems, fmt.Sprintf("%d revision patterns, over the limit of %d", len(d.Revisions), MaxRevisionPatterns))
	}
	seen := map[string]bool{}
	for _, p := range d.Revisions {
		if err := CheckRevisionPattern(p); err != nil {
			problems = append(problems, err.Error())
		}
		if seen[p] {
			problems = append(problems, fmt.Sprintf("revision pattern %q is named twice", p))
		}
		seen[p] = true
	}
	if d.DefaultRevision != "" {
		rev, err := ParseRevision(d.DefaultRevision)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("default revision: %v", err))
		case !rev.IsCommit() && !MatchRevision(d.Revisions, rev.Name):
			problems = append(problems, fmt.Sprintf("default revision %q matches none of the revision patterns %s", rev.Name, quoteList(d.Revisions)))
		}
	}
	if len(d.Description) > maxWorkspaceDescription {
		problems = append(problems, fmt.Sprintf("description is over %d bytes", maxWorkspaceDescription))
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// Marshal returns the canonical bytes of d.
func (d WorkspaceDoc) Marshal() ([]byte, error) {
	revs := make([]any, len(d.Revisions))
	for i, r := range d.Revisions {
		revs[i] = r
	}
	m := map[string]any{"repo": d.Repo, "revisions": revs}
	if d.DefaultRevision != "" {
		m["default_revision"] = d.DefaultRevision
	}
	if d.Description != "" {
		m["description"] = d.Description
	}
	return jcs.Marshal(m)
}

// Meta is what a workspace shows in lists: never the repository path.
func (d WorkspaceDoc) Meta() Meta {
	return Meta{Description: d.Description, Revisions: append([]string{}, d.Revisions...), DefaultRevision: d.DefaultRevision}
}

// ParseWorkspaceDoc reads stored workspace bytes strictly (unknown and repeated keys refused)
// and checks them.
func ParseWorkspaceDoc(b []byte) (WorkspaceDoc, error) {
	var d WorkspaceDoc
	if len(b) > maxWorkspaceDoc {
		return d, fmt.Errorf("read workspace document: %d bytes, over the limit of %d", len(b), maxWorkspaceDoc)
	}
	if err := strictjson.Unmarshal(b, &d); err != nil {
		return WorkspaceDoc{}, fmt.Errorf("read workspace document: %w", err)
	}
	if err := d.Check(); err != nil {
		return WorkspaceDoc{}, fmt.Errorf("read workspace document: %w", err)
	}
	return d, nil
}

// Revision is a parsed revision a caller asked a workspace for: a full commit id or a ref name.
type Revision struct {
	Commit string // 40 or 64 lowercase hex digits, or ""
	Name   string // a ref name below refs/heads or refs/tags, or ""
}

// IsCommit reports whether r names a commit id.
func (r Revision) IsCommit() bool { return r.Commit != "" }

func (r Revision) String() string {
	return cmp.Or(r.Commit, r.Name)
}

// ParseRevision parses what a caller may ask a workspace for: a full commit id (40 or 64
// hexadecimal digits; uppercase is folded) or a ref name as git check-ref-format allows it,
// further narrowed so that nothing git reads as revision syntax (~ ^ : @{ and the like), an
// option (a leading '-') or a path escape ("..") gets through. Ref names use ASCII letters,
// digits and . _ - + / only.
func ParseRevision(s string) (Revision, error) {
	if s == "" {
		return Revision{}, errors.New("the revision is empty")
	}
	if len(s) > MaxRevisionLen {
		return Revision{}, fmt.Errorf("the revision is %d bytes, over the limit of %d", len(s), MaxRevisionLen)
	}
	if (len(s) == 40 || len(s) == 64) && isHex(s) {
		return Revision{Commit: strings.ToLower(s)}, nil
	}
	if err := checkRefName(s, false); err != nil {
		return Revision{}, fmt.Errorf("revision %q %w", printable(s), err)
	}
	return Revision{Name: s}, nil
}

// CheckRevisionPattern checks a workspace's revision pattern: a ref name as [ParseRevision]
// takes it, in which '*', '?' and [...] match as path.Match does ('*' never crosses a '/').
func CheckRevisionPattern(p string) error {
	if p == "" {
		return errors.New("a revision pattern is empty")
	}
	if len(p) > MaxRevisionLen {
		return fmt.Errorf("revision pattern is %d bytes, over the limit of %d", len(p), MaxRevisionLen)
	}
	if err := checkRefName(p, true); err != nil {
		return fmt.Errorf("revision pattern %q %w", printable(p), err)
	}
	if _, err := path.Match(p, ""); err != nil {
		return fmt.Errorf("revision pattern %q is not a valid pattern: %w", p, err)
	}
	return nil
}

// MatchRevision reports whether the ref name matches one of patterns (path.Match semantics).
func MatchRevision(patterns []string, name string) bool {
	for _, p := range patterns {
		if ok, err := path.Match(p, name); err == nil && ok {
			return true
		}
	}
	return false
}

// IsRevisionWildcard reports whether a pattern matches more than one name.
func IsRevisionWildcard(p string) bool { return strings.ContainsAny(p, "*?[") }

// checkRefName refuses what git check-ref-format refuses and more: any byte outside
// [A-Za-z0-9._+/-] (with pattern, also * ? [ ] ^ inside brackets is refused too), a leading
// '-' or '/' or '.', a trailing '/' or '.', "..", "//", "/." and a trailing ".lock".
func checkRefName(s string, pattern bool) error {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '.', c == '_', c == '-', c == '+', c == '/':
		case pattern && (c == '*' || c == '?' || c == '[' || c == ']'):
		default:
			return fmt.Errorf("holds %q: a ref name uses letters, digits, '.', '_', '-', '+' and '/' only", rune(c))
		}
	}
	switch {
	case s[0] == '-':
		return errors.New("starts with '-'")
	case s[0] == '/' || s[len(s)-1] == '/':
		return errors.New("starts or ends with '/'")
	case s[0] == '.' || s[len(s)-1] == '.':
		return errors.New("starts or ends with '.'")
	case strings.Contains(s, ".."):
		return errors.New("holds \"..\"")
	case strings.Contains(s, "//"):
		return errors.New("holds \"//\"")
	case strings.Contains(s, "/."):
		return errors.New("has a component starting with '.'")
	case strings.HasSuffix(s, ".lock"):
		return errors.New("ends with \".lock\"")
	case s == "HEAD" || strings.HasPrefix(s, "refs/"):
		return errors.New("is not a branch or tag name (name main, not HEAD or refs/heads/main)")
	}
	return nil
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') && (c < 'A' || c > 'F') {
			return false
		}
	}
	return true
}

// printable cuts a caller's string short for a message.
func printable(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

func quoteList(items []string) string {
	b, _ := json.Marshal(items)
	return string(b)
}
