package k8stest

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/agora-dev/agora/internal/k8stest/nodeparse"
)

// unmountUnder detaches every mount at or beneath dir, deepest first, so RemoveAll deletes the
// cluster's files and never descends into a container's root file system or a pod's volume.
func unmountUnder(dir string) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	dir = filepath.Clean(dir)
	var under []string
	for _, mp := range nodeparse.MountPoints(b) {
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			under = append(under, mp)
		}
	}
	sort.Slice(under, func(i, j int) bool { return len(under[i]) > len(under[j]) })
	for _, mp := range under {
		_ = syscall.Unmount(mp, syscall.MNT_DETACH)
	}
}
