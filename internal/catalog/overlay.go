package catalog

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// A capability's files are mounted read-only outside the workspace; its overlay: patterns
// name the few that belong in the workspace as well (an agent's settings such as
// .claude/** or CLAUDE.md). A pattern is slash-separated and relative; each segment is a
// path.Match pattern, and a segment that is exactly ** matches any number of segments,
// none included.

// maxOverlayPatterns caps overlay: (a declaration, not a file list).
const maxOverlayPatterns = 64

// CheckOverlayPattern reports why p cannot be an overlay pattern, or nil.
func CheckOverlayPattern(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("an overlay pattern may not be empty")
	case len(p) > 4096:
		return fmt.Errorf("overlay pattern is longer than 4096 bytes")
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("overlay pattern %q is absolute; name a path inside the workspace such as .claude/**", p)
	case strings.ContainsAny(p, "\\\x00"):
		return fmt.Errorf("overlay pattern %q may not hold a backslash or NUL", p)
	}
	for _, seg := range strings.Split(p, "/") {
		switch {
		case seg == "" || seg == ".":
			return fmt.Errorf("overlay pattern %q has an empty or '.' segment", p)
		case seg == "..":
			return fmt.Errorf("overlay pattern %q leaves the workspace (..)", p)
		case strings.EqualFold(seg, ".git"):
			return fmt.Errorf("overlay pattern %q names the checkout's .git, which is git's, not the workspace's", p)
		case seg == "**":
		case strings.Contains(seg, "**"):
			return fmt.Errorf("overlay pattern %q: ** must be a whole segment", p)
		default:
			if _, err := path.Match(seg, ""); err != nil {
				return fmt.Errorf("overlay pattern %q: %w", p, err)
			}
		}
	}
	return nil
}

// MatchOverlay reports whether the archive path name matches pattern, which
// CheckOverlayPattern accepted.
func MatchOverlay(pattern, name string) bool {
	return matchSegments(strings.Split(pattern, "/"), strings.Split(name, "/"))
}

// matchSegments is a table over (pattern segment, name segment) positions, so no
// arrangement of ** costs more than len(pat)*len(name) steps.
func matchSegments(pat, name []string) bool {
	// ok[j] reports whether pat[i:] matches name[j:], for the current i, walking i down.
	ok := make([]bool, len(name)+1)
	ok[len(name)] = true
	for i := len(pat) - 1; i >= 0; i-- {
		next := make([]bool, len(name)+1)
		for j := len(name); j >= 0; j-- {
			switch {
			case pat[i] == "**":
				// none of name[j:], or name[j] and more
				next[j] = ok[j] || (j < len(name) && next[j+1])
			case j < len(name):
				m, _ := path.Match(pat[i], name[j])
				next[j] = m && ok[j+1]
			}
		}
		ok = next
	}
	return ok[0]
}

// OverlayFiles lists, sorted, the paths of files that g's overlay: patterns place in the
// workspace. capability.yaml is a declaration, never content.
func OverlayFiles(g CapabilityDoc, files []File) []string {
	var out []string
	for _, f := range files {
		if f.Path == CapabilityFile || inGitDir(f.Path) {
			continue
		}
		for _, p := range g.Overlay {
			if MatchOverlay(p, f.Path) {
				out = append(out, f.Path)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

// inGitDir reports whether name has a .git segment (any case): ** never places a file
// there.
func inGitDir(name string) bool {
	for _, seg := range strings.Split(name, "/") {
		if strings.EqualFold(seg, ".git") {
			return true
		}
	}
	return false
}

// OverlayClash is two capabilities of one subagent placing the same workspace path.
type OverlayClash struct {
	Path         string
	First, Later string // capability names, in the subagent's order
}

func (c *OverlayClash) Error() string {
	return fmt.Sprintf("capabilities %q and %q both overlay %s into the workspace; narrow one's overlay: patterns", c.First, c.Later, c.Path)
}

// CheckOverlayClash returns an [*OverlayClash] when two of the named capabilities overlay
// the same path, or a path and a directory above it. byCap holds each capability's
// OverlayFiles, in the subagent's order.
func CheckOverlayClash(names []string, byCap [][]string) error {
	owner := map[string]string{}
	for i, files := range byCap {
		for _, f := range files {
			if o, ok := owner[f]; ok {
				return &OverlayClash{Path: f, First: o, Later: names[i]}
			}
		}
		for _, f := range files {
			owner[f] = names[i]
		}
	}
	for f, o := range owner {
		for dir := path.Dir(f); dir != "."; dir = path.Dir(dir) {
			if o2, ok := owner[dir]; ok {
				return &OverlayClash{Path: dir, First: o2, Later: o}
			}
		}
	}
	return nil
}
