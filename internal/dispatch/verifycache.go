package dispatch

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/host"
)

// verifyCachePath is where a target's verify_cache is bound, read-only, in its verify
// sandboxes; XDG_CACHE_HOME names it, so Go finds its build cache at go-build below it.
const verifyCachePath = "/agora/cache"

// verifyCacheBind checks a target's verify_cache on the host when its gate runs (the config
// was checked when it was loaded; the directory may have changed since) and returns its bind:
// a directory with no symlink anywhere on its path and no file system mounted below it (what
// is bound is what the operator named), not on /proc or /sys, and neither agora's home nor
// inside or above it, by path or by identity (the home holds agora's keys and every
// dispatch's state, which the patch's code must never read). What the directory holds is the
// operator's: its symlinks resolve in the sandbox's own root, but a hard link is the file
// itself and a socket in it can be connected to through the read-only bind.
func verifyCacheBind(dir, home string) (compute.Bind, error) {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return compute.Bind{}, fmt.Errorf("verify_cache %s: %w", dir, err)
	}
	if real != dir {
		return compute.Bind{}, fmt.Errorf("verify_cache %s has a symlink on its path (it leads to %s): name the directory itself", dir, real)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return compute.Bind{}, fmt.Errorf("verify_cache %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return compute.Bind{}, fmt.Errorf("verify_cache %s is not a directory", dir)
	}
	// A relative or unclean home (a trailing slash) compared as a string would miss a cache
	// inside it.
	if abs, err := filepath.Abs(home); err == nil {
		home = abs
	}
	forms := homeForms(home)
	for _, h := range forms {
		if within(dir, h) || within(h, dir) {
			return compute.Bind{}, homeError(dir, home)
		}
	}
	// The same checks by identity: a bind mount (or a case-folding file system) shows the
	// home, or a directory above it, under a path no string comparison relates to it.
	for _, h := range forms {
		if sameDirOnPath(dir, h) || sameDirOnPath(h, dir) {
			return compute.Bind{}, homeError(dir, home)
		}
	}
	var fsInfo unix.Statfs_t
	if err := unix.Statfs(dir, &fsInfo); err != nil {
		return compute.Bind{}, fmt.Errorf("verify_cache %s: %w", dir, err)
	}
	if fsInfo.Type == unix.PROC_SUPER_MAGIC || fsInfo.Type == unix.SYSFS_MAGIC {
		return compute.Bind{}, fmt.Errorf("verify_cache %s is on /proc or /sys, the host's processes and devices, not a build cache", dir)
	}
	// The bind is recursive (bubblewrap binds submounts, bindPrivately binds with MS_REC, a
	// container engine's ro bind may leave a submount writable): a file system mounted below
	// the cache would be shown to the patch's code though the operator named only the cache.
	if below, err := mountBelow(dir); err != nil {
		return compute.Bind{}, fmt.Errorf("verify_cache %s: %w", dir, err)
	} else if below != "" {
		return compute.Bind{}, fmt.Errorf("verify_cache %s has a file system mounted below it at %s, which the sandbox would see too: mount nothing inside the cache", dir, below)
	}
	return compute.Bind{Src: dir, Dst: verifyCachePath}, nil
}

func homeError(dir, home string) error {
	return fmt.Errorf("verify_cache %s is agora's home %s, inside it or above it: the patch's code would read agora's keys and state", dir, home)
}

// sameDirOnPath says whether dir or one of its parents is the directory top, compared by
// device and inode.
func sameDirOnPath(dir, top string) bool {
	want, err := os.Stat(top)
	if err != nil {
		return false
	}
	for p := filepath.Clean(dir); ; p = filepath.Dir(p) {
		if fi, err := os.Stat(p); err == nil && os.SameFile(fi, want) {
			return true
		}
		if p == "/" || p == "." {
			return false
		}
	}
}

// mountBelow returns a mount point strictly below dir in this process's mount table, or "".
func mountBelow(dir string) (string, error) {
	mps, err := host.MountsUnder(dir)
	if err != nil {
		return "", fmt.Errorf("read the mount table: %w", err)
	}
	for _, p := range mps {
		if p != dir {
			return p, nil
		}
	}
	return "", nil
}

// homeForms is the home as given and with its symlinks resolved: a cache compared with
// only one of them could be the other.
func homeForms(home string) []string {
	forms := []string{filepath.Clean(home)}
	if real, err := filepath.EvalSymlinks(home); err == nil && real != forms[0] {
		forms = append(forms, real)
	}
	return forms
}

// within says whether path is dir or below it.
func within(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, strings.TrimSuffix(dir, "/")+"/")
}
