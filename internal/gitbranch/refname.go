package gitbranch

import (
	"fmt"
	"strings"
)

// CheckBranchName reports why name cannot be a branch (refs/heads/NAME), by git's
// check-ref-format rules, stricter where git is lenient: no leading '-' (it would read as an
// option), only printable ASCII, at most 255 bytes.
func CheckBranchName(name string) error {
	bad := func(why string) error { return fmt.Errorf("branch name %q is not valid: %s", name, why) }
	switch {
	case name == "":
		return bad("it is empty")
	case len(name) > 255:
		return bad("it is longer than 255 bytes")
	case strings.HasPrefix(name, "-"):
		return bad("it starts with '-'")
	case strings.HasPrefix(name, "refs/"):
		return bad("name the branch without refs/heads/")
	case name == "@" || name == "HEAD":
		return bad("it is a name git reserves")
	case strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/"):
		return bad("it starts or ends with '/'")
	case strings.HasSuffix(name, "."):
		return bad("it ends with '.'")
	case strings.Contains(name, ".."):
		return bad("it contains '..'")
	case strings.Contains(name, "@{"):
		return bad("it contains '@{'")
	case strings.Contains(name, "//"):
		return bad("it contains '//'")
	}
	for _, r := range name {
		if r < 0x21 || r > 0x7e || strings.ContainsRune("~^:?*[\\", r) {
			return bad(fmt.Sprintf("it contains %q (spaces, controls, non-ASCII and ~^:?*[\\ are not allowed)", r))
		}
	}
	for _, comp := range strings.Split(name, "/") {
		if strings.HasPrefix(comp, ".") || strings.HasSuffix(comp, ".lock") {
			return bad("a component starts with '.' or ends with '.lock'")
		}
	}
	return nil
}
