package local

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/compute"
)

// treeTop is the sandbox directory whose binds [bindTree] lays out as one tree: the
// dispatch layout's root (wire.DefaultRoot), which holds the worker, the bundle, the
// workspace, the out directory and the capability files. bwrap makes nothing there itself.
const treeTop = "/agora"

// treeDir is the tree's place under privateRoot.
const treeDir = privateRoot + "/tree"

// bindSources binds every source of binds where bwrap, run as the sandbox user, can reach
// it, and returns binds rewritten to those places: the binds below treeTop as one tree
// when they form one ([bindTree]), every other one on its own ([bindPrivately]). It MUST run
// on the locked thread that entered the sandbox's private mount namespace
// ([enterPrivateNS]): every mount it makes goes away with that namespace.
func bindSources(binds []compute.Bind) ([]compute.Bind, error) {
	members, first := treeMembers(binds)
	if members == nil || !mountSetattrWorks() {
		return bindPrivately(binds)
	}
	if err := bindTree(members); err != nil {
		return nil, err
	}
	var others []compute.Bind
	for _, b := range binds {
		if !below(filepath.Clean(b.Dst), treeTop) {
			others = append(others, b)
		}
	}
	bound, err := bindPrivately(others)
	if err != nil {
		return nil, err
	}
	out := make([]compute.Bind, 0, len(bound)+1)
	for i, b := range binds {
		switch {
		case i == first:
			out = append(out, compute.Bind{Src: treeDir, Dst: treeTop, Writable: true})
		case !below(filepath.Clean(b.Dst), treeTop):
			out, bound = append(out, bound[0]), bound[1:]
		}
	}
	return out, nil
}

// bindTree binds each of members (binds below treeTop, none below another:
// [treeMembers]) at its place relative to treeTop in one tree at treeDir, which bwrap then
// binds at treeTop with one --bind.
//
// bwrap reads and parses /proc/self/mountinfo again for every bind it makes (bubblewrap
// 0.8's bind_mount): the five binds of a dispatch below /agora were five such reads, one
// bind of the tree is one. The flags bwrap would give each bind are set here instead, by
// root in the private mount namespace, so the sandbox's less privileged user namespace
// finds them locked: a read-only bind is read-only, nosuid and nodev with everything
// mounted below its source (mount_setattr with AT_RECURSIVE, as --ro-bind remounts each
// submount), a writable one nosuid and nodev likewise; the tree's own directories are
// root's (0755) on a mount that is read-only, nosuid and nodev, as bwrap's root is once it
// is remounted read-only (and, like it, not noexec). bwrap's --bind of the tree keeps every
// one of those flags and adds only nosuid and nodev; in a root laid out whole
// ([layOutRoot]), bound with --dev-bind, it adds no nodev, and these are the only ones.
func bindTree(members []compute.Bind) error {
	if err := mkdirOpen(treeDir); err != nil {
		return fmt.Errorf("lay out the sandbox's %s: %w", treeTop, err)
	}
	for _, b := range members {
		if err := bindInTree(b); err != nil {
			return err
		}
	}
	// The tree bound onto itself with what is mounted in it: a mount of its own, whose
	// flags close its directories to writes.
	if err := unix.Mount(treeDir, treeDir, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("lay out the sandbox's %s: bind: %w", treeTop, err)
	}
	// Not noexec, which it has from privateRoot's tmpfs: the /agora of a warm slot and of
	// bwrap's own layout is not either, and nothing on this mount is a file to run.
	if err := unix.MountSetattr(unix.AT_FDCWD, treeDir, unix.AT_SYMLINK_NOFOLLOW, &unix.MountAttr{
		Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV,
		Attr_clr: unix.MOUNT_ATTR_NOEXEC,
	}); err != nil {
		return fmt.Errorf("lay out the sandbox's %s: make it read-only: %w", treeTop, err)
	}
	return nil
}

// treeMembers returns the binds below treeTop, cleaned, and the index of the first, or nil
// when they do not form a tree: fewer than two, one at treeTop itself, or one at or below
// another's place.
func treeMembers(binds []compute.Bind) ([]compute.Bind, int) {
	var members []compute.Bind
	first := -1
	for i, b := range binds {
		dst := filepath.Clean(b.Dst)
		if dst == treeTop {
			return nil, -1
		}
		if !below(dst, treeTop) {
			continue
		}
		for _, m := range members {
			if m.Dst == dst || below(dst, m.Dst) || below(m.Dst, dst) {
				return nil, -1
			}
		}
		if first < 0 {
			first = i
		}
		members = append(members, compute.Bind{Src: b.Src, Dst: dst, Writable: b.Writable})
	}
	if len(members) < 2 {
		return nil, -1
	}
	return members, first
}

// bindInTree binds b's source at its place in the tree with the flags bwrap would give it.
// The caller chose the source (it is not sandbox-controlled), so following a symlink in it
// is what bwrap would have done too.
func bindInTree(b compute.Bind) error {
	rel := strings.TrimPrefix(b.Dst, treeTop+"/")
	if err := mkdirsOpen(treeDir, filepath.Dir(rel)); err != nil {
		return fmt.Errorf("bind %s at %s: %w", b.Src, b.Dst, err)
	}
	attr := uint64(unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV)
	if !b.Writable {
		attr |= unix.MOUNT_ATTR_RDONLY
	}
	if err := bindWithAttr(b.Src, filepath.Join(treeDir, rel), attr); err != nil {
		return fmt.Errorf("bind %s at %s: %w", b.Src, b.Dst, err)
	}
	return nil
}

// bindWithAttr binds src (recursively) on a new mount point at dst, a directory when src is
// one, and sets attr on it and every mount below it (none when attr is 0).
func bindWithAttr(src, dst string, attr uint64) error {
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	if err := mountPoint(dst, fi.IsDir()); err != nil {
		return err
	}
	if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind: %w", err)
	}
	if attr == 0 {
		return nil
	}
	if err := setMountAttr(dst, unix.AT_RECURSIVE, attr); err != nil {
		return fmt.Errorf("set its flags: %w", err)
	}
	return nil
}

// setMountAttr sets attr on the mount at path (and, with AT_RECURSIVE, on every mount
// below it), without following a symlink at its end.
func setMountAttr(path string, flags int, attr uint64) error {
	return unix.MountSetattr(unix.AT_FDCWD, path, uint(flags|unix.AT_SYMLINK_NOFOLLOW), &unix.MountAttr{Attr_set: attr})
}

// mountSetattrWorks reports whether this thread may call mount_setattr(2) as bindTree does:
// a kernel before Linux 5.12 has none, and a seccomp filter (a container runtime's) may
// refuse it, or refuse AT_RECURSIVE. It asks, through every mount below privateRoot (the
// staged /etc and /dev), for nosuid, which each has already or which bwrap's bind of them
// adds anyway; a refusal leaves the binds apart.
func mountSetattrWorks() bool {
	return setMountAttr(privateRoot, unix.AT_RECURSIVE, unix.MOUNT_ATTR_NOSUID) == nil
}

// below reports whether p is strictly below dir (both clean and absolute).
func below(p, dir string) bool {
	return strings.HasPrefix(p, dir+"/")
}
