package verdict

import (
	"cmp"
	"fmt"
	"path"
	"strings"
)

// A gate's changes globs are an allow-list: with them set, a patch is admitted only when
// every path it touches is one the task may change. A deny-list (protect) cannot close a
// gate, because a new file the list never named can change what the command runs: a
// unittest/__main__.py at the root replaces `python3 -m unittest`'s runner, a conftest.py is
// loaded by pytest, a GNUmakefile is read by make before the Makefile, a go.work or .npmrc
// redirects the toolchain. Naming what the work may change closes every such file at once.

// Git's modes of a tree entry, as diff-index --raw writes them (octal).
const (
	ModeAbsent  uint32 = 0
	ModeFile    uint32 = 0o100644
	ModeExec    uint32 = 0o100755
	ModeSymlink uint32 = 0o120000
	ModeGitlink uint32 = 0o160000
)

// MaxLinkHops caps the symbolic links followed resolving one link's target (the kernel's
// own limit is 40).
const MaxLinkHops = 40

// maxLinkTarget caps a symbolic link's target in bytes (PATH_MAX).
const maxLinkTarget = 4096

// Change is one path a patch touches, read from the effect of applying it (git's
// diff-index between the base tree and the patched index): its mode before and after
// ([ModeAbsent] for an added or deleted path) and, when it is a symbolic link after, its
// target.
type Change struct {
	Path             string
	OldMode, NewMode uint32
	// Target is a symbolic link's target after the patch (NewMode == [ModeSymlink]).
	Target string
}

// Offence is a touched path a gate does not admit, and why.
type Offence struct {
	Path string
	// Why says it for a person: "outside changes", "a symbolic link to \"tests/x\", outside
	// changes", "a submodule (gitlink)".
	Why string
}

// Links looks up the symbolic links of the tree after the patch: the target of the link at
// path, and whether there is one there.
type Links func(path string) (target string, ok bool)

// Admit returns the touched paths a gate with changes (an allow-list) and protect (a
// deny-list, matched first and reported on its own as a protected path) does not admit, in
// the order of changed; nil admits the patch. A path is admitted when a changes glob matches
// it; beyond that:
//
//   - a submodule (a gitlink, after the patch) is never admitted: the gate checks out no
//     submodule, so the command would run without the commit the patch names, and a green
//     verdict would vouch for code nobody ran;
//   - a symbolic link (after the patch) is admitted only when its target, resolved from the
//     link's directory through the links of the patched tree (links, nil for none) as the
//     kernel would, stays inside the tree and lands on a path a changes glob matches and no
//     protect glob does: the work may not link to what it may not change. An absolute target,
//     one that climbs out of the tree or one past [MaxLinkHops] links is refused.
//
// Matching is byte for byte and case-sensitive: "Tests/x.py" is outside "tests/**".
func Admit(changes, protect *Matcher, changed []Change, links Links) []Offence {
	var out []Offence
	for _, c := range changed {
		if why := admit(changes, protect, c, links); why != "" {
			out = append(out, Offence{Path: c.Path, Why: why})
		}
	}
	return out
}

// admit says why c is not admitted, or "".
func admit(changes, protect *Matcher, c Change, links Links) string {
	if _, ok := changes.Match(c.Path); !ok {
		return "outside changes"
	}
	switch c.NewMode {
	case ModeGitlink:
		return "a submodule (gitlink): the gate checks out no submodule, so it cannot run what it names"
	case ModeSymlink:
		to, err := ResolveLink(c.Path, c.Target, links)
		if err != nil {
			return fmt.Sprintf("a symbolic link to %q: %v", clip(c.Target, 256), err)
		}
		shown := cmp.Or(to, ".")
		if protect != nil {
			if _, hit := protect.Match(to); hit {
				return fmt.Sprintf("a symbolic link to %q, a protected path", clip(shown, 256))
			}
		}
		if _, ok := changes.Match(to); !ok {
			return fmt.Sprintf("a symbolic link to %q, outside changes", clip(shown, 256))
		}
	}
	return ""
}

// ResolveLink resolves the target of the symbolic link at link (a repository-relative path)
// as the kernel would inside the tree: from the link's directory, component by component,
// following each link of the patched tree it meets (links; nil for none), ".." going up from
// where the walk really is. It returns the repository-relative path reached ("" for the root
// itself), or why the target leaves the tree: an absolute target, a climb above the root, more
// than [MaxLinkHops] links, an empty or over-long target or one holding a NUL byte.
func ResolveLink(link, target string, links Links) (string, error) {
	if err := checkTarget(target); err != nil {
		return "", err
	}
	var at []string // the resolved components so far
	for _, c := range strings.Split(path.Dir(link), "/") {
		switch c {
		case "", ".":
			continue // a leading or doubled slash names no directory
		case "..":
			return "", fmt.Errorf("the link's own path leaves the tree")
		}
		at = append(at, c)
	}
	todo := strings.Split(target, "/")
	hops := 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(at) == 0 {
				return "", fmt.Errorf("it leaves the tree")
			}
			at = at[:len(at)-1]
			continue
		}
		at = append(at, c)
		if links == nil {
			continue
		}
		next, ok := links(strings.Join(at, "/"))
		if !ok {
			continue
		}
		if hops++; hops > MaxLinkHops {
			return "", fmt.Errorf("more than %d symbolic links on the way", MaxLinkHops)
		}
		if err := checkTarget(next); err != nil {
			return "", fmt.Errorf("the link %q on the way: %w", clip(strings.Join(at, "/"), 256), err)
		}
		at = at[:len(at)-1]
		todo = append(strings.Split(next, "/"), todo...)
	}
	return strings.Join(at, "/"), nil
}

// checkTarget refuses a target the walk cannot judge inside the tree.
func checkTarget(t string) error {
	switch {
	case t == "":
		return fmt.Errorf("an empty target")
	case len(t) > maxLinkTarget:
		return fmt.Errorf("a target of %d bytes; at most %d", len(t), maxLinkTarget)
	case strings.IndexByte(t, 0) >= 0:
		return fmt.Errorf("a target holding a NUL byte")
	case strings.HasPrefix(t, "/"):
		return fmt.Errorf("an absolute target, outside the tree")
	}
	return nil
}

// OutsideChanges returns the red verdict of a patch touching paths the gate does not admit
// ([Admit]): the command never ran. The verdict names the paths in the order found (the
// first one first), at most [MaxProtectedPaths]; its detail says why for each it names.
func OutsideChanges(command []string, changes []string, offences []Offence) Verdict {
	shown := offences
	shown = shown[:min(len(shown), MaxProtectedPaths)]
	detail := fmt.Sprintf("the patch touches %d path(s) the gate does not admit (changes: %s): ", len(offences), strings.Join(changes, ", "))
	paths := make([]string, 0, len(shown))
	for i, o := range shown {
		if i > 0 {
			detail += ", "
		}
		detail += fmt.Sprintf("%q (%s)", o.Path, o.Why)
		paths = append(paths, ShownPath(o.Path))
	}
	if len(offences) > len(shown) {
		detail += fmt.Sprintf(" and %d more", len(offences)-len(shown))
	}
	const end = "; the command did not run"
	if len(detail)+len(end) > maxDetail {
		detail = clip(detail, maxDetail-len(end)-4) + " ..."
	}
	v := Red(ReasonOutside, detail+end, -1, command, 0, TailText{})
	v.OutsidePaths = paths
	return v
}
