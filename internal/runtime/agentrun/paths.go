package agentrun

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ResolvedRel returns p, every symlink resolved, relative to dir (resolved too), and whether
// it is inside. A path that does not exist (yet, or any more) is resolved by its nearest
// existing parent, the rest joined as written.
func ResolvedRel(dir, p string) (string, bool) {
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", false
	}
	rest, hops := "", 0
	for q := filepath.Clean(p); ; {
		r, err := filepath.EvalSymlinks(q)
		if err == nil {
			rel, err := filepath.Rel(root, filepath.Join(r, rest))
			return rel, err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
		}
		if !errors.Is(err, fs.ErrNotExist) || q == filepath.Dir(q) {
			return "", false
		}
		// A dangling link is written through (its target is made): follow it.
		if fi, err := os.Lstat(q); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			if hops++; hops > 40 {
				return "", false
			}
			t, err := os.Readlink(q)
			if err != nil {
				return "", false
			}
			if !filepath.IsAbs(t) {
				t = filepath.Join(filepath.Dir(q), t)
			}
			q = filepath.Clean(t)
			continue
		}
		rest = filepath.Join(filepath.Base(q), rest)
		q = filepath.Dir(q)
	}
}
