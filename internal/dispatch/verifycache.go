package dispatch

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/agora-dev/agora/internal/compute"
)

// verifyCachePath is where a target's verify_cache is bound, read-only, in its verify
// sandboxes; XDG_CACHE_HOME names it, so Go finds its build cache at go-build below it.
const verifyCachePath = "/agora/cache"

// verifyCacheBind checks a target's verify_cache on the host when its gate runs (the config
// was checked when it was loaded; the directory may have changed since) and returns its bind:
// a directory with no symlink anywhere on its path (what is bound is what the operator
// named), and neither agora's home nor inside or above it (the home holds agora's keys and
// every dispatch's state, which the patch's code must never read).
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
	for _, h := range homeForms(home) {
		if within(dir, h) || within(h, dir) {
			return compute.Bind{}, fmt.Errorf("verify_cache %s is agora's home %s, inside it or above it: the patch's code would read agora's keys and state", dir, home)
		}
	}
	return compute.Bind{Src: dir, Dst: verifyCachePath}, nil
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
