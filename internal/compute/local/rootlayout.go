package local

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/compute"
)

// rootDir is where layOutRoot lays out a sandbox's whole root, on a tmpfs of its own.
const rootDir = privateRoot + "/root"

// layOutRoot lays out the sandbox's whole root at rootDir, as bwrap would build it from
// system (systemOptions: read-only binds and symlinks), the staged /etc and /dev and binds,
// and returns rootDir, which bwrapOptions then binds at / with one --dev-bind. It returns ""
// and mounts nothing when the sandbox's layout is not that: /etc or /dev not staged, or a
// bind besides the tree of the binds below /agora ([bindSources]); the caller leaves the
// layout to bwrap then.
//
// bwrap reads and parses /proc/self/mountinfo again for every bind it makes, and without
// this it makes six for a dispatch: /usr, /etc, /dev, the /agora tree and the two
// --remount-ro. Each place gets the flags bwrap gives it, set here by root in the private
// mount namespace, so the sandbox's less privileged user namespace finds them locked:
//   - system's binds (/usr, and /bin and the like where they are not links): read-only,
//     nosuid and nodev through every mount below them (--ro-bind);
//   - /etc: the same (--ro-bind of the staged directory);
//   - /dev: nosuid through every mount below it, device nodes usable (--dev-bind), and the
//     directory itself read-only (--remount-ro /dev);
//   - /agora: the tree as bindTree made it;
//   - / itself: a tmpfs owned by owner (the sandbox's host user), nosuid and nodev, as
//     bwrap's root is, read-only once laid out (--remount-ro /); its directories are
//     root's. /proc, /tmp and /dev/shm are mount points for what bwrap still mounts there
//     (--proc and the two sized tmpfs).
//
// It MUST run on the locked thread that entered the sandbox's private mount namespace
// ([enterPrivateNS]), after stageSystem and bindSources.
func layOutRoot(system []string, staged stagedSystem, binds []compute.Bind, owner *compute.HostUser) (string, error) {
	if owner == nil || staged.etc == "" || staged.dev == "" || len(binds) != 1 || binds[0].Src != treeDir || binds[0].Dst != treeTop {
		return "", nil
	}
	ops, ok := systemBinds(system)
	if !ok {
		return "", nil
	}
	if err := mkdirOpen(rootDir); err != nil {
		return "", fmt.Errorf("lay out the sandbox's root: %w", err)
	}
	// A tmpfs of its own, as bwrap's root is: owned by the sandbox user, with bwrap's flags
	// and options, so that it reads the same from inside (a warm slot's root is bwrap's).
	if err := unix.Mount("tmpfs", rootDir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV,
		fmt.Sprintf("uid=%d,gid=%d", owner.UID, owner.GID)); err != nil {
		return "", fmt.Errorf("lay out the sandbox's root: mount a tmpfs: %w", err)
	}
	if err := os.Chmod(rootDir, 0o755); err != nil {
		return "", fmt.Errorf("lay out the sandbox's root: %w", err)
	}
	for _, op := range ops {
		dst := filepath.Join(rootDir, op.dst)
		if err := mkdirsOpen(rootDir, filepath.Dir(op.dst[1:])); err != nil {
			return "", fmt.Errorf("lay out the sandbox's %s: %w", op.dst, err)
		}
		if op.link != "" {
			if err := os.Symlink(op.link, dst); err != nil {
				return "", fmt.Errorf("lay out the sandbox's %s: %w", op.dst, err)
			}
			continue
		}
		if err := bindWithAttr(op.src, dst, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV); err != nil {
			return "", fmt.Errorf("lay out the sandbox's %s: %w", op.dst, err)
		}
	}
	if err := bindWithAttr(staged.etc, filepath.Join(rootDir, "etc"), unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV); err != nil {
		return "", fmt.Errorf("lay out the sandbox's /etc: %w", err)
	}
	dev := filepath.Join(rootDir, "dev")
	if err := bindWithAttr(staged.dev, dev, unix.MOUNT_ATTR_NOSUID); err != nil {
		return "", fmt.Errorf("lay out the sandbox's /dev: %w", err)
	}
	if err := setMountAttr(dev, 0, unix.MOUNT_ATTR_RDONLY); err != nil {
		return "", fmt.Errorf("lay out the sandbox's /dev: make it read-only: %w", err)
	}
	for _, d := range []string{"proc", "tmp"} {
		if err := mkdirOpen(filepath.Join(rootDir, d)); err != nil {
			return "", fmt.Errorf("lay out the sandbox's /%s: %w", d, err)
		}
	}
	// The tree keeps the flags bindTree gave each of its mounts.
	if err := bindWithAttr(treeDir, filepath.Join(rootDir, treeTop[1:]), 0); err != nil {
		return "", fmt.Errorf("lay out the sandbox's %s: %w", treeTop, err)
	}
	if err := setMountAttr(rootDir, 0, unix.MOUNT_ATTR_RDONLY); err != nil {
		return "", fmt.Errorf("lay out the sandbox's root: make it read-only: %w", err)
	}
	return rootDir, nil
}

// systemOp is one of systemOptions' entries: a read-only bind of src at dst, or a link at
// dst to link.
type systemOp struct {
	src, dst, link string
}

// systemBinds reads systemOptions' entries back; ok is false for any option it does not
// know, and for a place at or below an earlier one (layOutRoot would make its parents
// through a link it laid out, on whatever the link names), which leave the layout to bwrap.
func systemBinds(system []string) ([]systemOp, bool) {
	var ops []systemOp
	for i := 0; i < len(system); i += 3 {
		if i+2 >= len(system) {
			return nil, false
		}
		opt, a, b := system[i], system[i+1], system[i+2]
		if !filepath.IsAbs(b) || filepath.Clean(b) != b || b == "/" {
			return nil, false
		}
		for _, op := range ops {
			if b == op.dst || below(b, op.dst) || below(op.dst, b) {
				return nil, false
			}
		}
		switch opt {
		case "--ro-bind":
			ops = append(ops, systemOp{src: a, dst: b})
		case "--symlink":
			ops = append(ops, systemOp{link: a, dst: b})
		default:
			return nil, false
		}
	}
	return ops, true
}
