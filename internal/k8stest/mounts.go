package k8stest

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
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
	for _, mp := range mountPoints(b) {
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			under = append(under, mp)
		}
	}
	sort.Slice(under, func(i, j int) bool { return len(under[i]) > len(under[j]) })
	for _, mp := range under {
		_ = syscall.Unmount(mp, syscall.MNT_DETACH)
	}
}

// mountPoints returns the mount point of each line of a /proc/<pid>/mountinfo: the fifth
// field, with the kernel's octal escapes (\040 for a space) undone. Malformed lines are skipped.
func mountPoints(mountinfo []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(mountinfo))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 || !strings.HasPrefix(f[4], "/") {
			continue
		}
		out = append(out, unescapeOctal(f[4]))
	}
	return out
}

func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
