package local

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute"
)

// Attacks on the run-as sandbox's root laid out by root before bwrap (rootlayout.go:
// layOutRoot), which bwrap binds at / with --dev-bind: bwrap then adds nosuid to every
// mount below it but not nodev, and remounts nothing read-only, so every flag must have
// been set by layOutRoot. The adversary is the agent inside (uid 65534, the owner of the
// root tmpfs) and, for the locks, root of a user namespace made from the start's private
// mount namespace (bwrap's position). The host side is checked for what the layout leaves
// behind, shares between sandboxes, or starts after a failure.
//
// Each sandbox attack also runs with the same binds made apart (a bind below another keeps
// bwrap's layout of the system, /etc and /dev) and with bwrap's own layout (RunAs nil).
//
// Probe mode "root47r" (stageProbe) runs root47rProbe.

// root47rProbe dispatches the probe's subcommands.
func root47rProbe(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "root47r: no subcommand")
		return 2
	}
	switch args[0] {
	case "attack":
		return root47rAttack()
	case "normal":
		return root47rNormal(args[1:])
	case "hold":
		return root47rHold()
	case "sysctl":
		// Write kernel.core_pattern back with the value it has: success shows the power to
		// set it (a pipe to a program the host's root runs on the next crash) without
		// changing it.
		b, err := os.ReadFile("/proc/sys/kernel/core_pattern")
		if err != nil {
			fmt.Println("ERR read kernel.core_pattern:", err)
			return 1
		}
		try("write kernel.core_pattern", os.WriteFile("/proc/sys/kernel/core_pattern", b, 0))
		try("write vm.drop_caches", openWrite("/proc/sys/vm/drop_caches", 0))
		return 0
	case "userns":
		return root47rUserNS(args[1], args[2])
	default:
		fmt.Fprintln(os.Stderr, "root47r: unknown subcommand", args[0])
		return 2
	}
}

// root47rClosed are the sandbox's paths outside the writable places that no write may
// change: the root (a tmpfs the agent's uid owns), the system binds, /etc, /dev, the
// mount points bwrap mounts on, and the extra system directory bind of the fixture
// (/lib32, with a 0777 tmpfs below it).
var root47rClosed = []string{"/", "/usr", "/usr/bin", "/etc", "/etc/alternatives", "/dev",
	"/lib32", "/lib32/sub", "/bin", "/lib64", "/agora",
	"/etc/passwd", "/etc/hosts", "/lib32/sub/file", "/lib32/file"}

// root47rMounts are the mount points every mount call is tried on.
var root47rMounts = []string{"/", "/usr", "/etc", "/etc/passwd", "/dev", "/dev/null", "/dev/pts", "/proc",
	"/tmp", "/dev/shm", "/lib32", "/lib32/sub", "/agora", "/agora/workspace"}

// root47rAttack: every write, metadata change, link, rename, descriptor trick, mount call
// and device open an agent without capabilities can try on the root laid out for it and
// everything on it outside /agora. ESCAPED for any that works, ERR for anything a normal
// program needs that fails; then the mount table.
func root47rAttack() int {
	var st unix.Stat_t
	if err := unix.Stat("/", &st); err == nil {
		fmt.Printf("uid %d root-owner %d root-mode %o\n", os.Getuid(), st.Uid, st.Mode&0o7777)
	}
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		for _, e := range ents {
			n, _ := strconv.Atoi(e.Name())
			target, err := os.Readlink("/proc/self/fd/" + e.Name())
			if n > 2 && err == nil && !strings.HasPrefix(target, "anon_inode:") && !strings.HasSuffix(target, "/fd") {
				fmt.Printf("ESCAPED inherited fd %d -> %s\n", n, target)
			}
		}
	}
	for _, p := range root47rClosed {
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			fmt.Printf("ERR stat %s: %v\n", p, err)
			continue
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			try("create in "+p, createFile(filepath.Join(p, "planted47r")))
			try("mkdir in "+p, unix.Mkdir(filepath.Join(p, "dir47r"), 0o755))
			try("symlink in "+p, unix.Symlink("/tmp", filepath.Join(p, "link47r")))
			try("mkfifo in "+p, unix.Mknod(filepath.Join(p, "fifo47r"), unix.S_IFIFO|0o666, 0))
			try("mknod null in "+p, unix.Mknod(filepath.Join(p, "null47r"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
			try("bind a socket in "+p, func() error {
				fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
				if err != nil {
					return fmt.Errorf("(socket) %w", err)
				}
				defer unix.Close(fd)
				return unix.Bind(fd, &unix.SockaddrUnix{Name: filepath.Join(p, "sock47r")})
			}())
			try("O_TMPFILE in "+p, func() error {
				fd, err := unix.Open(p, unix.O_TMPFILE|unix.O_RDWR, 0o600)
				if err == nil {
					unix.Close(fd)
				}
				return err
			}())
			try("openat O_CREAT through /proc/self/fd of an O_PATH of "+p, func() error {
				d, err := unix.Open(p, unix.O_PATH|unix.O_DIRECTORY, 0)
				if err != nil {
					return fmt.Errorf("(open) %w", err)
				}
				defer unix.Close(d)
				return createFile(fmt.Sprintf("/proc/self/fd/%d/planted47r-b", d))
			}())
		} else {
			try("open-write "+p, openWrite(p, 0))
			try("truncate "+p, unix.Truncate(p, st.Size))
			try("reopen-write an O_PATH of "+p+" through /proc/self/fd", func() error {
				fd, err := unix.Open(p, unix.O_PATH, 0)
				if err != nil {
					return fmt.Errorf("(open) %w", err)
				}
				defer unix.Close(fd)
				return openWrite("/proc/self/fd/"+strconv.Itoa(fd), 0)
			}())
		}
		mode := st.Mode & 0o7777
		try("chmod "+p, unix.Chmod(p, mode))
		try("chown "+p, unix.Chown(p, os.Getuid(), os.Getgid()))
		try("utimes "+p, unix.UtimesNano(p, []unix.Timespec{{Sec: 1}, {Sec: 1}}))
		try("setxattr "+p, unix.Setxattr(p, "user.agora47r", []byte("x"), 0))
		// The root's owner is the agent: only the mount's read-only flag refuses these on a
		// descriptor, which the path's permission checks never see.
		try("fchmod an O_RDONLY descriptor of "+p, func() error {
			fd, err := unix.Open(p, unix.O_RDONLY, 0)
			if err != nil {
				return fmt.Errorf("(open) %w", err)
			}
			defer unix.Close(fd)
			return unix.Fchmod(fd, mode)
		}())
		try("fchown an O_RDONLY descriptor of "+p, func() error {
			fd, err := unix.Open(p, unix.O_RDONLY, 0)
			if err != nil {
				return fmt.Errorf("(open) %w", err)
			}
			defer unix.Close(fd)
			return unix.Fchown(fd, os.Getuid(), os.Getgid())
		}())
		try("fsetxattr an O_RDONLY descriptor of "+p, func() error {
			fd, err := unix.Open(p, unix.O_RDONLY, 0)
			if err != nil {
				return fmt.Errorf("(open) %w", err)
			}
			defer unix.Close(fd)
			return unix.Fsetxattr(fd, "user.agora47r", []byte("x"), 0)
		}())
		try("fchmodat through /proc/self/fd of an O_PATH of "+p, func() error {
			fd, err := unix.Open(p, unix.O_PATH, 0)
			if err != nil {
				return fmt.Errorf("(open) %w", err)
			}
			defer unix.Close(fd)
			return unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), mode)
		}())
		try("utimensat AT_EMPTY_PATH of an O_PATH of "+p, func() error {
			fd, err := unix.Open(p, unix.O_PATH, 0)
			if err != nil {
				return fmt.Errorf("(open) %w", err)
			}
			defer unix.Close(fd)
			return unix.UtimesNanoAt(fd, "", []unix.Timespec{{Sec: 2}, {Sec: 2}}, unix.AT_EMPTY_PATH)
		}())
	}
	// The root's links and mount point directories: replace, remove, move.
	for _, p := range []string{"/bin", "/lib", "/lib64", "/sbin"} {
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		try("unlink the link "+p, unix.Unlink(p))
		try("rename the link "+p, unix.Rename(p, p+"47r"))
		try("lchown the link "+p, unix.Lchown(p, os.Getuid(), os.Getgid()))
		try("create through the link "+p, createFile(p+"/planted47r"))
	}
	for _, p := range []string{"/etc", "/dev", "/usr", "/proc", "/tmp", "/agora", "/lib32"} {
		try("rmdir "+p, unix.Rmdir(p))
		try("rename "+p, unix.Rename(p, p+"47r"))
	}
	// Across mounts: a file of /tmp or of the workspace into the root or /etc.
	if err := os.WriteFile("/tmp/evil47r", []byte("evil"), 0o755); err != nil {
		fmt.Println("ERR write /tmp:", err)
	}
	if err := os.WriteFile("/agora/workspace/evil47r", []byte("evil"), 0o755); err != nil {
		fmt.Println("ERR write the workspace:", err)
	}
	for _, src := range []string{"/tmp/evil47r", "/agora/workspace/evil47r", "/dev/shm"} {
		for _, dst := range []string{"/evil47r", "/etc/ld.so.preload", "/usr/evil47r", "/dev/evil47r", "/lib32/sub/evil47r"} {
			try("rename "+src+" to "+dst, unix.Rename(src, dst))
			try("link "+src+" to "+dst, unix.Link(src, dst))
		}
	}
	try("rename over /etc/passwd", unix.Rename("/tmp/evil47r", "/etc/passwd"))
	try("rename over /bin", unix.Rename("/tmp/evil47r", "/bin"))
	// Mounts: none may change, clone, move, cover or uncover any of the root.
	_ = os.Mkdir("/tmp/mnt47r", 0o755)
	for _, p := range root47rMounts {
		tryMountCalls(p, "/tmp/mnt47r")
	}
	for _, fstype := range []string{"tmpfs", "proc", "devpts"} {
		try("fsopen "+fstype, func() error {
			fd, err := unix.Fsopen(fstype, 0)
			if err == nil {
				unix.Close(fd)
			}
			return err
		}())
	}
	try("mount devpts newinstance", unix.Mount("devpts", "/tmp/mnt47r", "devpts", 0, "newinstance,ptmxmode=0666"))
	try("pivot_root", unix.PivotRoot("/tmp", "/tmp/mnt47r"))
	try("chroot", unix.Chroot("/tmp"))
	try("unshare user ns", unix.Unshare(unix.CLONE_NEWUSER))
	try("unshare mount ns", unix.Unshare(unix.CLONE_NEWNS))
	try("open_by_handle_at /", func() error {
		h, _, err := unix.NameToHandleAt(unix.AT_FDCWD, "/", 0)
		if err != nil {
			return fmt.Errorf("(name_to_handle_at) %w", err)
		}
		fd, err := unix.OpenByHandleAt(unix.AT_FDCWD, h, unix.O_RDONLY)
		if err == nil {
			unix.Close(fd)
		}
		return err
	}())
	// /proc: its mount point on the root, and the kernel's knobs.
	try("create /proc/planted47r", createFile("/proc/planted47r"))
	for _, p := range []string{"/proc/sys/kernel/hostname", "/proc/sys/vm/drop_caches", "/proc/sysrq-trigger", "/proc/sys/kernel/core_pattern"} {
		try("write "+p, openWrite(p, 0))
	}
	// Device nodes: none usable but /dev's (nodev on every other mount, the system bind's
	// submount and the workspace's included), none can be made.
	for _, p := range []string{"/lib32/null", "/lib32/sub/null", "/agora/workspace/null", "/agora/workspace/devsub/null"} {
		try("open device node "+p, func() error {
			f, err := os.OpenFile(p, os.O_RDWR, 0)
			if err == nil {
				f.Close()
			}
			return err
		}())
	}
	for _, p := range []string{"/tmp/mem47r", "/dev/shm/mem47r", "/agora/workspace/mem47r"} {
		try("mknod "+p, unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 1))))
	}
	for _, p := range []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"} {
		if f, err := os.OpenFile(p, os.O_RDWR, 0); err != nil {
			fmt.Printf("ERR open %s: %v\n", p, err)
		} else {
			f.Close()
		}
	}
	if m, _, err := openPty(); err != nil {
		fmt.Println("ERR openpty:", err)
	} else {
		m.Close()
	}
	// Nothing of the private root, the host's /run or bwrap's staging is in the sandbox.
	for _, p := range []string{privateRoot, rootDir, treeDir, "/run", "/oldroot", "/newroot", "/etc/shadow", "/root"} {
		_, err := os.Lstat(p)
		try("see "+p, err)
	}
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	if bytes.Contains(b, []byte(privateRoot)) {
		fmt.Println("ESCAPED the mount table names", privateRoot)
	}
	fmt.Print("mountinfo:\n", string(b))
	return 0
}

// root47rNormal: what a normal program does in a sandbox; ERR for anything that fails.
// args: the sizes /tmp and /dev/shm must have.
func root47rNormal(args []string) int {
	ok := func(what string, err error) {
		if err != nil {
			fmt.Printf("ERR %s: %v\n", what, err)
		} else {
			fmt.Println("ok", what)
		}
	}
	ok("write /dev/null", os.WriteFile("/dev/null", []byte("x"), 0))
	ok("read /dev/zero", func() error {
		f, err := os.Open("/dev/zero")
		if err != nil {
			return err
		}
		defer f.Close()
		b := make([]byte, 8)
		if _, err := io.ReadFull(f, b); err != nil || !bytes.Equal(b, make([]byte, 8)) {
			return fmt.Errorf("read %v %v", b, err)
		}
		return nil
	}())
	ok("read /dev/urandom", func() error {
		f, err := os.Open("/dev/urandom")
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.ReadFull(f, make([]byte, 16))
		return err
	}())
	ok("write /dev/full is ENOSPC", func() error {
		err := os.WriteFile("/dev/full", []byte("x"), 0)
		if !errors.Is(err, unix.ENOSPC) {
			return fmt.Errorf("got %v", err)
		}
		return nil
	}())
	for _, l := range [][2]string{{"/dev/stdout", "/proc/self/fd/1"}, {"/dev/fd", "/proc/self/fd"}, {"/dev/ptmx", "pts/ptmx"}} {
		if got, err := os.Readlink(l[0]); err != nil || got != l[1] {
			fmt.Printf("ERR %s links to %q (%v), want %q\n", l[0], got, err, l[1])
		}
	}
	ok("stat /dev/fd/0", func() error { _, err := os.Stat("/dev/fd/0"); return err }())
	for i, p := range []string{"/tmp", "/dev/shm"} {
		ok("write "+p, os.WriteFile(p+"/scratch47r", []byte("x"), 0o644))
		ok("mmap exec from "+p, func() error {
			f, err := os.Open(p + "/scratch47r")
			if err != nil {
				return err
			}
			defer f.Close()
			b, err := unix.Mmap(int(f.Fd()), 0, 1, unix.PROT_READ|unix.PROT_EXEC, unix.MAP_PRIVATE)
			if err == nil {
				unix.Munmap(b)
			}
			return err
		}())
		var fs unix.Statfs_t
		if err := unix.Statfs(p, &fs); err != nil {
			fmt.Printf("ERR statfs %s: %v\n", p, err)
		} else if want, _ := strconv.ParseInt(args[i], 10, 64); int64(fs.Blocks)*fs.Bsize != want {
			fmt.Printf("ERR %s has %d bytes, want %d\n", p, int64(fs.Blocks)*fs.Bsize, want)
		}
	}
	ok("a pty through /dev/ptmx", func() error {
		m, n, err := openPty()
		if err != nil {
			return err
		}
		defer m.Close()
		s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
		if err != nil {
			return err
		}
		defer s.Close()
		if _, err := m.Write([]byte("hi\n")); err != nil {
			return err
		}
		b := make([]byte, 3)
		if _, err := io.ReadFull(s, b); err != nil || string(b) != "hi\n" {
			return fmt.Errorf("read %q %v", b, err)
		}
		return nil
	}())
	for _, p := range []string{"/proc/self/status", "/proc/self/mountinfo", "/proc/cpuinfo", "/proc/1/cmdline"} {
		_, err := os.ReadFile(p)
		ok("read "+p, err)
	}
	// Dynamic linking through the root's links (/bin, /lib64's loader), and name lookups
	// through /etc's nsswitch.conf, hosts, passwd and group, without a network.
	for _, c := range []struct {
		argv []string
		want string
	}{
		{[]string{"/bin/sh", "-c", "echo shell ran"}, "shell ran"},
		{[]string{"/lib64/ld-linux-x86-64.so.2", "/usr/bin/true"}, ""},
		{[]string{"/usr/bin/getent", "hosts", "localhost"}, "localhost"},
		{[]string{"/usr/bin/getent", "passwd", "root"}, "root:x:0:0"},
		{[]string{"/usr/bin/getent", "group", "root"}, "root:x:0"},
		{[]string{"/bin/ls", "/"}, "usr"},
	} {
		if _, err := os.Stat(c.argv[0]); err != nil && c.argv[0] == "/lib64/ld-linux-x86-64.so.2" {
			continue
		}
		out, err := exec.Command(c.argv[0], c.argv[1:]...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), c.want) {
			fmt.Printf("ERR run %q: %q %v\n", c.argv, out, err)
		} else {
			fmt.Printf("ok run %q\n", c.argv)
		}
	}
	wd, err := os.Getwd()
	fmt.Println("cwd", wd, err)
	return 0
}

// root47rHold: print the root's file system and what /agora/workspace holds, then hold
// until fd 3 (a pipe from the host) reaches its end.
func root47rHold() int {
	ents, err := os.ReadDir("/agora/workspace")
	if err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	fmt.Println("sees", strings.Join(names, ","))
	fmt.Println("rootdev", statDev("/"))
	b, _ := os.ReadFile("/proc/self/mountinfo")
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 && f[4] == "/" {
			fmt.Println("rootmount", l)
		}
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.NewFile(3, "release"))
	return 0
}

// root47rUserNS runs as root of a user namespace made from the start's private mount
// namespace once layOutRoot has run (what bwrap is to the sandbox, and what an agent that
// got past bwrap's --cap-drop and --disable-userns would be), mapped to the sandbox's host
// user, which owns the root tmpfs. It tries to make the laid-out root or anything on it
// writable, clear nosuid or nodev, uncover what a bind hides, or copy the root without its
// flags; it opens the device nodes of the system bind's source. scratch is an empty
// directory to bind the root on, as bwrap's --dev-bind does.
func root47rUserNS(root, scratch string) int {
	caps, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(caps), "\n") {
		if strings.HasPrefix(l, "CapEff:") {
			fmt.Println(l)
		}
	}
	writable := func(r, when string) {
		try(when+": create in the root", createFile(r+"/planted47r"))
		try(when+": mkdir in the root", unix.Mkdir(r+"/dir47r", 0o755))
		try(when+": chmod the root", unix.Chmod(r, 0o777))
		try(when+": utimes the root", unix.UtimesNano(r, []unix.Timespec{{Sec: 1}, {Sec: 1}}))
		try(when+": setxattr the root", unix.Setxattr(r, "user.agora47r", []byte("x"), 0))
		try(when+": create in /dev", createFile(r+"/dev/planted47r"))
		try(when+": create in the system bind's 0777 submount", createFile(r+"/lib32/sub/planted47r"))
		try(when+": write the system bind's 0666 file", openWrite(r+"/lib32/sub/file", 0))
		for _, p := range []string{r + "/lib32/null", r + "/lib32/sub/null", r + "/agora/workspace/devsub/null"} {
			try(when+": open device node "+p, func() error {
				f, err := os.OpenFile(p, os.O_RDWR, 0)
				if err == nil {
					f.Close()
				}
				return err
			}())
		}
	}
	readOnly := []string{root, root + "/usr", root + "/etc", root + "/etc/passwd", root + "/dev", root + "/lib32", root + "/lib32/sub", root + "/agora"}
	for _, p := range append(slices.Clone(readOnly), root+"/dev/null", root+"/dev/pts", root+"/agora/workspace", root+"/agora/workspace/devsub") {
		if slices.Contains(readOnly, p) {
			try("remount-rw "+p, unix.Mount("", p, "", unix.MS_REMOUNT|unix.MS_BIND, ""))
			try("remount-rw keeping nosuid,nodev "+p, unix.Mount("", p, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_NOSUID|unix.MS_NODEV, ""))
			try("mount_setattr clear ro "+p, unix.MountSetattr(unix.AT_FDCWD, p, 0, &unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY}))
		}
		try("mount_setattr clear nosuid,nodev "+p, unix.MountSetattr(unix.AT_FDCWD, p, 0,
			&unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}))
		try("mount_setattr clear nosuid "+p, unix.MountSetattr(unix.AT_FDCWD, p, 0, &unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_NOSUID}))
		if p != root {
			try("umount "+p+" (uncover what it hides)", unix.Unmount(p, unix.MNT_DETACH))
		}
	}
	writable(root, "after the flag changes")
	// What bwrap does with the root (--dev-bind: a recursive bind), then what it must not
	// be able to.
	if err := unix.Mount(root, scratch, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		fmt.Println("ERR bind the root as bwrap does:", err)
		return 1
	}
	fmt.Println("bound the root as bwrap does")
	try("remount-rw the bound root", unix.Mount("", scratch, "", unix.MS_REMOUNT|unix.MS_BIND, ""))
	try("remount-rw the bound root's /dev", unix.Mount("", scratch+"/dev", "", unix.MS_REMOUNT|unix.MS_BIND, ""))
	try("mount_setattr clear the bound root", unix.MountSetattr(unix.AT_FDCWD, scratch, unix.AT_RECURSIVE,
		&unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}))
	try("umount the bound root's /usr", unix.Unmount(scratch+"/usr", unix.MNT_DETACH))
	try("bind the root without its binds (uncover the mount points)", unix.Mount(root, scratch+"/tmp", "", unix.MS_BIND, ""))
	try("clear a detached clone of the root", func() error {
		fd, err := unix.OpenTree(unix.AT_FDCWD, root, unix.OPEN_TREE_CLONE|unix.AT_RECURSIVE)
		if err != nil {
			return fmt.Errorf("(open_tree) %w", err)
		}
		defer unix.Close(fd)
		return unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE,
			&unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV})
	}())
	try("clone the root alone", func() error {
		fd, err := unix.OpenTree(unix.AT_FDCWD, root, unix.OPEN_TREE_CLONE)
		if err == nil {
			unix.Close(fd)
		}
		return err
	}())
	writable(root, "after the copies")
	writable(scratch, "the bound root")
	const ro, ns = unix.ST_RDONLY | unix.ST_NOSUID | unix.ST_NODEV, unix.ST_NOSUID | unix.ST_NODEV
	for _, r := range []string{root, scratch} {
		for _, c := range []struct {
			path string
			want int64
		}{
			{r, ro}, {r + "/usr", ro}, {r + "/etc", ro}, {r + "/etc/passwd", ro}, {r + "/dev", ro},
			{r + "/dev/pts", unix.ST_NOSUID}, {r + "/dev/null", unix.ST_NOSUID},
			{r + "/lib32", ro}, {r + "/lib32/sub", ro}, {r + "/agora", ro},
			{r + "/agora/workspace", ns}, {r + "/agora/workspace/devsub", ns},
		} {
			var st unix.Statfs_t
			if err := unix.Statfs(c.path, &st); err != nil {
				fmt.Printf("ERR statfs %s: %v\n", c.path, err)
			} else if st.Flags&c.want != c.want {
				fmt.Printf("ESCAPED %s has flags %#x, want %#x set\n", c.path, st.Flags, c.want)
			} else {
				fmt.Printf("flags held on %s: %#x\n", c.path, st.Flags)
			}
		}
	}
	return 0
}

// root47rFixture: the sources of a dispatch-shaped sandbox whose every bind is below /agora
// (so that its root is laid out), and a system directory bound as /lib32 (a host whose
// /lib32 is a directory, not a link): on the host it has a device node, and a tmpfs mounted
// without nodev holding another and a 0666 file in a 0777 directory. The workspace has a
// device node and a tmpfs without nodev holding another.
type root47rFixture struct {
	work, out, nested, lib32 string
	exe                      string
}

func newRoot47rFixture(t *testing.T) root47rFixture {
	t.Helper()
	dir := func(mode os.FileMode) string {
		d := t.TempDir()
		// The parent too: bwrap reaches the system binds as the sandbox user where it lays
		// them out itself.
		for _, p := range []string{filepath.Dir(d), d} {
			if err := os.Chmod(p, mode|0o755); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	mount := func(p string) {
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount("tmpfs", p, "tmpfs", 0, "mode=0777,size=64k"); err != nil {
			t.Fatalf("mount a tmpfs at %s: %v", p, err)
		}
		t.Cleanup(func() { unix.Unmount(p, unix.MNT_DETACH) })
	}
	mknull := func(p string) {
		if err := unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
			t.Fatalf("mknod %s: %v", p, err)
		}
		if err := os.Chmod(p, 0o666); err != nil {
			t.Fatal(err)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	f := root47rFixture{work: dir(0o777), out: dir(0o777), nested: dir(0o755), lib32: dir(0o755), exe: exe}
	mknull(filepath.Join(f.lib32, "null"))
	if err := os.WriteFile(filepath.Join(f.lib32, "file"), []byte("lib"), 0o666); err != nil {
		t.Fatal(err)
	}
	mount(filepath.Join(f.lib32, "sub"))
	mknull(filepath.Join(f.lib32, "sub", "null"))
	if err := os.WriteFile(filepath.Join(f.lib32, "sub", "file"), []byte("sub"), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(f.lib32, "sub", "file"), 0o666); err != nil {
		t.Fatal(err)
	}
	mknull(filepath.Join(f.work, "null"))
	mount(filepath.Join(f.work, "devsub"))
	mknull(filepath.Join(f.work, "devsub", "null"))
	if err := os.Mkdir(filepath.Join(f.work, "nested"), 0o755); err != nil {
		t.Fatal(err)
	}
	return f
}

// system is the host's systemOptions with the fixture's directory bound at /lib32.
func (f root47rFixture) system() []string {
	return append(systemOptions("/"), "--ro-bind", f.lib32, "/lib32")
}

// binds: every one below /agora, the probe among them.
func (f root47rFixture) binds() []compute.Bind {
	return []compute.Bind{
		{Src: f.exe, Dst: "/agora/probe"},
		{Src: f.work, Dst: "/agora/workspace", Writable: true},
		{Src: f.out, Dst: "/agora/out", Writable: true},
	}
}

// root47rLayout is one way the fixture's sandbox is laid out.
type root47rLayout struct {
	name  string
	runAs *compute.HostUser
	apart bool // a bind below another: bwrap lays out the system, /etc, /dev and each bind
}

var root47rLayouts = []root47rLayout{
	{"root", testRunAs, false},
	{"apart", testRunAs, true},
	{"bwrap", nil, false},
}

func (f root47rFixture) spec(l root47rLayout, args ...string) compute.Spec {
	s := compute.Spec{
		ID:     "rt47r-" + l.name,
		Argv:   append([]string{"/agora/probe"}, args...),
		Env:    []string{"PATH=/usr/bin:/bin", stageProbeEnv + "=root47r"},
		Binds:  f.binds(),
		RunAs:  l.runAs,
		Dir:    "/agora/workspace",
		Limits: compute.Limits{Timeout: 60 * time.Second, Scratch: 16 << 20},
	}
	if l.apart {
		s.Binds = append(s.Binds, compute.Bind{Src: f.nested, Dst: "/agora/workspace/nested"})
	}
	return s
}

// isLaidOutRoot reports whether a sandbox's mount table is of a root layOutRoot laid out:
// / a tmpfs mount of its own (bwrap's root is a directory of the tmpfs it pivots from).
func isLaidOutRoot(m map[string]mountEntry) bool {
	return m["/"].fs == "tmpfs" && m["/"].root == "/"
}

// root47rDevNodes are the mounts of /dev that keep devices usable.
var root47rDevNodes = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/pts"}

// TestRedTeam47r_AgentAttacksOnTheRoot: an agent inside a sandbox whose root was laid out
// (every bind below /agora) tries every write, metadata change (by path, by descriptor, by
// /proc/self/fd), link, rename, mount call, device open and mknod on /, the system binds
// (and a system directory bind with a device node and a 0777 tmpfs below it), the root's
// links, /etc, /dev, /proc and the workspace's device nodes. None may work, in the laid-out
// root, the binds made apart or bwrap's own layout; /dev's nodes, ptys, /tmp and the
// workspace stay usable.
//
// Defences: the root tmpfs made read-only last (layOutRoot's setMountAttr(rootDir, RDONLY)):
// the root's owner is the agent's uid, so without it creating /planted47r, chmod and fchmod
// of / succeed; MOUNT_ATTR_NODEV with AT_RECURSIVE on system binds (bindWithAttr): bwrap's
// --dev-bind of the root adds no nodev, so without it /lib32/null and /lib32/sub/null open;
// MOUNT_ATTR_RDONLY with AT_RECURSIVE on them (/lib32/sub is a 0777 tmpfs); the tree's own
// nodev (bindInTree) for the workspace's nodes.
func TestRedTeam47r_AgentAttacksOnTheRoot(t *testing.T) {
	requireBwrap(t)
	requireRoot(t)
	runRoot47rAttack(t)
}

// runRoot47rAttack runs the attack probe in each layout and returns each layout's mounts.
func runRoot47rAttack(t *testing.T) map[string]map[string]mountEntry {
	t.Helper()
	f := newRoot47rFixture(t)
	p := newProvider(t, Options{NoCgroup: true})
	p.system = f.system()
	got := map[string]map[string]mountEntry{}
	for _, l := range root47rLayouts {
		r := run(t, p, f.spec(l, "attack"))
		if r.exit.Code != 0 {
			t.Fatalf("%s: exit %+v\n%s\n%s", l.name, r.exit, r.stdout, r.stderr)
		}
		for _, line := range strings.Split(r.stdout, "\n") {
			switch {
			case strings.HasPrefix(line, "ESCAPED") && l.runAs == nil:
				// Host root behind its user namespace (TestRedTeamStage_WriteAndMountAttacks):
				// logged, not failed; see TestRedTeam47r_SysctlWrites.
				t.Logf("%s (host root inside, not a RunAs sandbox; not failed): %s", l.name, line)
			case strings.HasPrefix(line, "ESCAPED") || strings.HasPrefix(line, "ERR"):
				t.Errorf("%s: %s", l.name, line)
			}
		}
		if l.runAs != nil && !strings.Contains(r.stdout, "uid 65534 root-owner 65534 root-mode 755\n") {
			t.Errorf("%s: the root is not the agent's 0755 directory, as bwrap's is:\n%.300s", l.name, r.stdout)
		}
		if testing.Verbose() {
			t.Logf("%s:\n%s", l.name, r.stdout)
		}
		_, info, _ := strings.Cut(r.stdout, "mountinfo:\n")
		got[l.name] = parseMountinfo(info)
		for _, n := range []string{"evil47r"} {
			os.Remove(filepath.Join(f.work, n))
		}
		if want := l.name == "root"; isLaidOutRoot(got[l.name]) != want {
			t.Fatalf("%s: the root laid out %v, want %v: / is %+v", l.name, !want, want, got[l.name]["/"])
		}
	}
	return got
}

// TestRedTeam47r_EveryMountFlagHeld: in the laid-out root every mount is nosuid; every one
// but /dev's six nodes and /dev/pts is nodev (bwrap's --dev-bind of the root adds none);
// every one is read-only but /proc, /tmp, /dev/shm, the writable binds and /dev's nodes;
// and against the binds made apart and bwrap's own layout (RunAs nil) every mount point is
// there with no flag weaker, the same file system and source, and no mount is extra but /,
// /etc and /agora (mounts of their own there).
//
// Defences: every flag layOutRoot, stageSystem and bindTree set (the tmpfs's MS_NODEV and
// MS_NOSUID, the read-only root and /dev, the system binds' and /etc's recursive flags).
func TestRedTeam47r_EveryMountFlagHeld(t *testing.T) {
	requireBwrap(t)
	requireRoot(t)
	got := runRoot47rAttack(t)
	root := got["root"]
	writable := []string{"/proc", "/tmp", "/dev/shm", "/agora/workspace", "/agora/out"}
	under := func(mp string, dirs []string) bool {
		for _, d := range dirs {
			if mp == d || below(mp, d) {
				return true
			}
		}
		return false
	}
	for mp, e := range root {
		if strings.HasPrefix(mp, privateRoot) {
			t.Errorf("root: the sandbox mounts %s", mp)
		}
		if !e.opts["nosuid"] {
			t.Errorf("root: %s is not nosuid: %v", mp, e.opts)
		}
		dev := slices.Contains(root47rDevNodes, mp)
		if !dev && !e.opts["nodev"] {
			t.Errorf("root: %s is not nodev: %v", mp, e.opts)
		}
		if !dev && !under(mp, writable) && !e.opts["ro"] {
			t.Errorf("root: %s is writable: %v", mp, e.opts)
		}
	}
	for _, mp := range []string{"/", "/usr", "/etc", "/etc/passwd", "/dev", "/dev/pts", "/proc", "/tmp", "/dev/shm",
		"/lib32", "/lib32/sub", "/agora", "/agora/probe", "/agora/workspace", "/agora/workspace/devsub", "/agora/out"} {
		if _, ok := root[mp]; !ok {
			t.Errorf("root: no mount at %s", mp)
		}
	}
	if root["/"].opts["noexec"] {
		t.Errorf("root: / is noexec, bwrap's is not: %v", root["/"].opts)
	}
	for _, base := range []string{"apart", "bwrap"} {
		other := got[base]
		for mp, b := range other {
			// bwrap covers /proc's knobs read-only only where it, as the user it runs as,
			// may write them: host root's sandbox, not a RunAs one.
			if mp == "/agora/workspace/nested" || (base == "bwrap" && below(mp, "/proc")) {
				continue
			}
			e, ok := root[mp]
			if !ok {
				t.Errorf("%s mounts %s (%s %v), the laid-out root does not", base, mp, b.fs, b.opts)
				continue
			}
			for _, o := range []string{"ro", "nosuid", "nodev", "noexec"} {
				if b.opts[o] && !e.opts[o] {
					t.Errorf("%s is %s in %s but not in the laid-out root: %v against %v", mp, o, base, e.opts, b.opts)
				}
			}
			// /dev is a tmpfs either way; the rest are the same sources.
			if e.fs != b.fs || (e.fs != "tmpfs" && e.fs != "proc" && e.fs != "devpts" && e.root != b.root) {
				t.Errorf("%s is %s %s in the laid-out root, %s %s in %s", mp, e.fs, e.root, b.fs, b.root, base)
			}
		}
		for mp := range root {
			if _, ok := other[mp]; !ok && mp != "/etc" && mp != "/agora" {
				t.Errorf("the laid-out root mounts %s, %s does not", mp, base)
			}
		}
	}
}

// TestRedTeam47r_RootFlagsLockedInUserNS: root of a user namespace made from the start's
// private namespace after layOutRoot (bwrap's position, every capability there, mapped to
// the sandbox's host user, who owns the root tmpfs) cannot make the root, /usr, /etc, /dev,
// the system directory bind or its submount writable, clear nosuid or nodev, unmount a bind
// to uncover its mount point, bind or clone the root without its flags, or open a device
// node outside /dev; the recursive bind bwrap's --dev-bind makes has every flag.
//
// Defence: layOutRoot sets every flag as root in the private namespace before bwrap, so the
// kernel locks them (MNT_LOCK_*, MNT_LOCKED) in the sandbox's less privileged namespace.
// Without the root's read-only flag the owner creates and chmods in it; without the system
// binds' recursive nodev the device nodes open.
func TestRedTeam47r_RootFlagsLockedInUserNS(t *testing.T) {
	requireRoot(t)
	requireUserNS(t)
	f := newRoot47rFixture(t)
	scratch := privateRoot + "/scratch47r"
	type result struct {
		out, root string
		err       error
	}
	r := inTree47NS(t, nil, func() result {
		var r result
		s := compute.Spec{Binds: f.binds(), RunAs: testRunAs}
		staged, err := stageSystem(s)
		if err != nil {
			r.err = err
			return r
		}
		binds, err := bindSources(s.Binds)
		if err != nil {
			r.err = err
			return r
		}
		if r.root, r.err = layOutRoot(f.system(), staged, binds, testRunAs); r.err != nil || r.root == "" {
			return r
		}
		if r.err = os.Mkdir(scratch, 0o755); r.err != nil {
			return r
		}
		cmd := exec.Command(r.root+"/agora/probe", "userns", r.root, scratch)
		cmd.Env = []string{stageProbeEnv + "=root47r"}
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(testRunAs.UID), Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(testRunAs.GID), Size: 1}},
			Credential:  &syscall.Credential{Uid: 0, Gid: 0},
			Pdeathsig:   syscall.SIGKILL,
		}
		b, err := cmd.CombinedOutput()
		r.out, r.err = string(b), err
		return r
	})
	if r.err != nil {
		t.Fatalf("%v\n%s", r.err, r.out)
	}
	if r.root != rootDir {
		t.Fatalf("layOutRoot = %q: no root laid out", r.root)
	}
	var capEff uint64
	for _, line := range strings.Split(r.out, "\n") {
		fmt.Sscanf(line, "CapEff:\t%x", &capEff)
	}
	if capEff&(1<<unix.CAP_SYS_ADMIN) == 0 {
		t.Fatalf("the child is not root of its user namespace (CapEff %x):\n%s", capEff, r.out)
	}
	if !strings.Contains(r.out, "bound the root as bwrap does") {
		t.Errorf("the child could not bind the root as bwrap does:\n%s", r.out)
	}
	for _, line := range strings.Split(r.out, "\n") {
		if strings.HasPrefix(line, "ESCAPED") || strings.HasPrefix(line, "ERR") {
			t.Errorf("%s", line)
		}
	}
	if testing.Verbose() {
		t.Logf("%s", r.out)
	}
}

// TestRedTeam47r_NormalProgramsWork: in the laid-out root a program writes /dev/null, reads
// /dev/zero and /dev/urandom, gets ENOSPC from /dev/full, writes /dev/stdout and /dev/fd/1,
// writes and maps for exec /tmp and /dev/shm, which are sized as the spec says, opens a
// pty through /dev/ptmx, reads /proc, runs dynamically linked programs through /bin and the
// loader's /lib64 (a link, and on a host where /lib64 is a directory a read-only bind),
// looks up names through /etc without a network, and starts in its Dir, as in the binds
// made apart and bwrap's own layout.
func TestRedTeam47r_NormalProgramsWork(t *testing.T) {
	requireBwrap(t)
	requireRoot(t)
	f := newRoot47rFixture(t)
	// A host whose /lib64 is a directory: systemOptions binds it read-only.
	var dirLib64 []string
	for i := 0; i < len(systemOptions("/")); i += 3 {
		o := systemOptions("/")[i : i+3]
		if o[2] == "/lib64" {
			o = []string{"--ro-bind", "/usr/lib64", "/lib64"}
		}
		dirLib64 = append(dirLib64, o...)
	}
	if !slices.Contains(dirLib64, "/usr/lib64") {
		dirLib64 = append(dirLib64, "--ro-bind", "/usr/lib64", "/lib64")
	}
	if _, err := os.Stat("/usr/lib64"); err != nil {
		dirLib64 = nil
	}
	shm := strconv.Itoa(min(16<<20, maxShm))
	for _, sys := range []struct {
		name string
		opts []string
	}{{"host", f.system()}, {"lib64 a directory", dirLib64}} {
		if sys.opts == nil {
			t.Logf("SKIP: %s: no /usr/lib64 here", sys.name)
			continue
		}
		p := newProvider(t, Options{NoCgroup: true})
		p.system = sys.opts
		for _, l := range root47rLayouts {
			r := run(t, p, f.spec(l, "normal", strconv.Itoa(16<<20), shm))
			name := sys.name + " " + l.name
			if r.exit.Code != 0 {
				t.Fatalf("%s: exit %+v\n%s\n%s", name, r.exit, r.stdout, r.stderr)
			}
			for _, line := range strings.Split(r.stdout, "\n") {
				if strings.HasPrefix(line, "ERR") {
					t.Errorf("%s: %s", name, line)
				}
			}
			for _, want := range []string{"cwd /agora/workspace <nil>\n", "ok run [\"/bin/sh\""} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("%s: no %q:\n%s", name, want, r.stdout)
				}
			}
			if testing.Verbose() && l.name == "root" {
				t.Logf("%s:\n%s", name, r.stdout)
			}
			r = run(t, p, compute.Spec{ID: "rt47r-mi", Argv: []string{"/agora/probe"}, RunAs: l.runAs,
				Env: []string{"PATH=/usr/bin:/bin", stageProbeEnv + "=mountinfo"}, Binds: f.spec(l).Binds})
			m := parseMountinfo(r.stdout)
			if isLaidOutRoot(m) != (l.name == "root") {
				t.Errorf("%s: / is %+v", name, m["/"])
			}
			if lib := m["/lib64"]; sys.name != "host" && (lib.fs == "" || !lib.opts["ro"] || !lib.opts["nodev"] || !lib.opts["nosuid"]) {
				t.Errorf("%s: /lib64, a directory bind, is %+v", name, lib)
			}
		}
	}
}

// TestRedTeam47r_ConcurrentRootsNoLeak: two sandboxes with laid-out roots at the same
// time. Each has a root tmpfs of its own (another device) and sees only its own workspace;
// the host's mount table and /run/agora-sandbox show nothing of either while they run; each
// start's thread holds one laid-out root and one tree, of its own sources; when both end
// nothing remains.
//
// Defence: the private mount namespace of each start's thread (enterPrivateNS): rootDir and
// treeDir are one path for every sandbox.
func TestRedTeam47r_ConcurrentRootsNoLeak(t *testing.T) {
	requireBwrap(t)
	requireRoot(t)
	p := newProvider(t, Options{NoCgroup: true})
	if err := ensurePrivateRoot(); err != nil {
		t.Fatal(err)
	}
	before := hostMountState(t)
	type sandbox struct {
		f       root47rFixture
		release *os.File
		h       compute.Handle
		stdout  syncBuffer
		stderr  syncBuffer
	}
	boxes := make([]*sandbox, 2)
	waited := false
	defer func() {
		for _, sb := range boxes {
			if !waited && sb != nil && sb.h != nil {
				sb.release.Close()
				sb.h.Wait()
			}
		}
	}()
	for i := range boxes {
		sb := &sandbox{f: newRoot47rFixture(t)}
		boxes[i] = sb
		if err := os.WriteFile(filepath.Join(sb.f.work, fmt.Sprintf("mine%d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		rd, wr, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		sb.release = wr
		s := sb.f.spec(root47rLayouts[0], "hold")
		s.ID = "rt47r-conc-" + strconv.Itoa(i)
		s.Files = []*os.File{rd}
		s.Stdout, s.Stderr = &sb.stdout, &sb.stderr
		h, err := p.Start(t.Context(), s)
		rd.Close()
		if err != nil {
			wr.Close()
			t.Fatalf("sandbox %d: %v", i, err)
		}
		sb.h = h
	}
	devs := map[string]bool{}
	for i, sb := range boxes {
		agoratest.WaitFor(t, 30*time.Second, fmt.Sprintf("sandbox %d to hold", i), func() bool {
			return strings.Contains(sb.stdout.String(), "ready") || sb.stderr.String() != ""
		})
		out := sb.stdout.String()
		if !strings.Contains(out, fmt.Sprintf("sees devsub,mine%d,nested,null\n", i)) {
			t.Errorf("sandbox %d sees not only its own workspace:\n%s\n%s", i, out, sb.stderr.String())
		}
		if !strings.Contains(out, " / / ro,nosuid,nodev") {
			t.Errorf("sandbox %d's root is not laid out:\n%s", i, out)
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "rootdev ") {
				devs[line] = true
			}
		}
	}
	if len(devs) != 2 {
		t.Errorf("the two sandboxes' roots are on %d file systems: %v", len(devs), devs)
	}
	if during := hostMountState(t); during != before {
		t.Errorf("the host's mounts while the sandboxes run:\nbefore:\n%s\nduring:\n%s", before, during)
	}
	tids := threadsSeeing(t, rootDir)
	if len(tids) != 2 {
		t.Errorf("threads seeing a laid-out root: %v, want the two starts'", tids)
	}
	owners := map[int]bool{}
	for _, tid := range tids {
		b, err := os.ReadFile(filepath.Join("/proc/self/task", tid, "mountinfo"))
		if err != nil {
			t.Fatal(err)
		}
		for i, sb := range boxes {
			// The work directories' own submounts are the host's, in every namespace: the
			// workspace's bind in the laid-out root names its source.
			if strings.Contains(string(b), sb.f.work+" "+rootDir+"/agora/workspace ") {
				owners[i] = true
				if strings.Contains(string(b), boxes[1-i].f.work+" "+rootDir+"/agora/workspace ") {
					t.Errorf("thread %s's namespace holds both sandboxes' workspaces", tid)
				}
			}
		}
		if n := strings.Count(string(b), " "+rootDir+" "); n != 1 {
			t.Errorf("thread %s's namespace has %d laid-out roots", tid, n)
		}
		if n := strings.Count(string(b), " "+treeDir+" "); n != 1 {
			t.Errorf("thread %s's namespace has %d trees", tid, n)
		}
	}
	if len(owners) != 2 {
		t.Errorf("the starts' threads hold the workspaces of %v, want both", owners)
	}
	waited = true
	for i, sb := range boxes {
		sb.release.Close()
		if exit, err := sb.h.Wait(); err != nil || exit.Code != 0 {
			t.Errorf("sandbox %d: %+v %v %s", i, exit, err, sb.stderr.String())
		}
	}
	agoratest.WaitFor(t, 10*time.Second, "the private mount namespaces to end", func() bool {
		return len(threadsSeeing(t, privateRoot)) == 0
	})
	if after := hostMountState(t); after != before {
		t.Errorf("the host's mounts changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// TestRedTeam47r_FailedLayoutStartsNothing: a system bind whose source is missing or a
// dangling link, or a system entry where the layout puts /etc, /dev, /proc or /agora fails
// the start: no sandbox runs, nothing stays mounted, no thread keeps the namespace, the
// host's /run/agora-sandbox is as it was. A system option layOutRoot does not know, or one
// at or below another (a link or bind on /usr, a link twice: TestSystemBinds), leaves the
// layout to bwrap.
//
// Defence: layOutRoot returns every error (mountPoint's O_EXCL and Mkdir refuse a place
// already laid out), and the namespace goes with the thread (onOwnThread).
func TestRedTeam47r_FailedLayoutStartsNothing(t *testing.T) {
	requireBwrap(t)
	requireRoot(t)
	if err := ensurePrivateRoot(); err != nil {
		t.Fatal(err)
	}
	f := newRoot47rFixture(t)
	d := t.TempDir()
	missing := filepath.Join(d, "missing")
	dangling := filepath.Join(d, "dangling")
	if err := os.Symlink(missing, dangling); err != nil {
		t.Fatal(err)
	}
	usr := []string{"--ro-bind", "/usr", "/usr"}
	marker := fmt.Sprintf("rt47r-failed-%d", os.Getpid())
	for _, c := range []struct {
		name   string
		system []string
		bad    string
	}{
		{"/usr missing", []string{"--ro-bind", missing, "/usr"}, missing},
		{"a dangling link's bind", append(slices.Clone(usr), "--ro-bind", dangling, "/lib32"), dangling},
		{"a link at /etc", append(slices.Clone(usr), "--symlink", "/tmp", "/etc"), "/etc"},
		{"a bind at /dev", append(slices.Clone(usr), "--ro-bind", "/dev", "/dev"), "/dev"},
		{"a bind at /proc", append(slices.Clone(usr), "--ro-bind", f.lib32, "/proc"), "/proc"},
		{"a bind at /agora", append(slices.Clone(usr), "--ro-bind", f.lib32, "/agora"), "/agora"},
	} {
		p := newProvider(t, Options{NoCgroup: true})
		p.system = c.system
		before := hostMountState(t)
		s := f.spec(root47rLayouts[0], marker)
		s.Env = []string{"PATH=/usr/bin:/bin", stageProbeEnv + "=mountinfo"}
		h, err := p.Start(t.Context(), s)
		if err == nil {
			h.Wait()
			t.Errorf("%s: the sandbox started", c.name)
			continue
		}
		if !strings.Contains(err.Error(), c.bad) {
			t.Errorf("%s: Start = %v, which does not name %s", c.name, err, c.bad)
		}
		if pids := procsWith(marker); len(pids) > 0 {
			t.Errorf("%s: a process runs with the failed start's marker: %v", c.name, pids)
		}
		agoratest.WaitFor(t, 10*time.Second, "the private mount namespace to end", func() bool {
			return len(threadsSeeing(t, privateRoot)) == 0
		})
		if after := hostMountState(t); after != before {
			t.Errorf("%s: the host's mounts changed:\nbefore:\n%s\nafter:\n%s", c.name, before, after)
		}
	}
	// An option layOutRoot does not read back: bwrap lays out the root, the start works.
	p := newProvider(t, Options{NoCgroup: true})
	p.system = append(systemOptions("/"), "--ro-bind-try", f.lib32, "/lib32")
	r := run(t, p, compute.Spec{ID: "rt47r-unknown", Argv: []string{"/agora/probe"}, RunAs: testRunAs,
		Env: []string{"PATH=/usr/bin:/bin", stageProbeEnv + "=mountinfo"}, Binds: f.binds()})
	m := parseMountinfo(r.stdout)
	if r.exit.Code != 0 || isLaidOutRoot(m) || m["/lib32"].fs == "" || !m["/lib32/sub"].opts["nodev"] {
		t.Errorf("an unknown system option: exit %+v, / %+v, /lib32 %+v, /lib32/sub %+v\n%s", r.exit, m["/"], m["/lib32"], m["/lib32/sub"], r.stderr)
	}
}

// TestRedTeam47r_ShapesThatKeepBwrapsLayout: the root is laid out only when /etc and /dev
// are staged and the only bind is the tree; a bind outside /agora, into /etc or /dev, a
// single bind below /agora, a bind below another, or no RunAs keeps bwrap's layout, and
// every shape runs.
//
// Defence: layOutRoot's first check.
func TestRedTeam47r_ShapesThatKeepBwrapsLayout(t *testing.T) {
	requireBwrap(t)
	requireRoot(t)
	f := newRoot47rFixture(t)
	p := newProvider(t, Options{NoCgroup: true})
	marker := filepath.Join(t.TempDir(), "marker")
	if err := os.WriteFile(marker, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	probe := compute.Bind{Src: f.exe, Dst: "/agora/probe"}
	work := compute.Bind{Src: f.work, Dst: "/agora/workspace", Writable: true}
	for _, c := range []struct {
		name  string
		binds []compute.Bind
		runAs *compute.HostUser
		root  bool
	}{
		{"every bind below /agora", []compute.Bind{probe, work}, testRunAs, true},
		{"a bind outside /agora", []compute.Bind{probe, work, {Src: marker, Dst: "/marker"}}, testRunAs, false},
		{"a bind into /etc", []compute.Bind{probe, work, {Src: marker, Dst: "/etc/marker"}}, testRunAs, false},
		{"a bind into /dev", []compute.Bind{probe, work, {Src: marker, Dst: "/dev/marker"}}, testRunAs, false},
		{"a bind into /tmp", []compute.Bind{probe, work, {Src: marker, Dst: "/tmp/marker"}}, testRunAs, false},
		{"a single bind below /agora", []compute.Bind{probe}, testRunAs, false},
		{"a bind below another", []compute.Bind{probe, work, {Src: f.nested, Dst: "/agora/workspace/nested"}}, testRunAs, false},
		{"no RunAs", []compute.Bind{probe, work}, nil, false},
	} {
		r := run(t, p, compute.Spec{ID: "rt47r-shape", Argv: []string{"/agora/probe"}, RunAs: c.runAs,
			Env: []string{"PATH=/usr/bin:/bin", stageProbeEnv + "=mountinfo"}, Binds: c.binds,
			Limits: compute.Limits{Timeout: 30 * time.Second}})
		if r.exit.Code != 0 {
			t.Errorf("%s: exit %+v %s %s", c.name, r.exit, r.stdout, r.stderr)
			continue
		}
		m := parseMountinfo(r.stdout)
		if got := isLaidOutRoot(m); got != c.root {
			t.Errorf("%s: root laid out %v, want %v: / %+v", c.name, got, c.root, m["/"])
		}
		for mp, e := range m {
			if !slices.Contains(root47rDevNodes, mp) && (!e.opts["nodev"] || !e.opts["nosuid"]) {
				t.Errorf("%s: %s is %v", c.name, mp, e.opts)
			}
		}
		if !m["/"].opts["ro"] || !m["/dev"].opts["ro"] {
			t.Errorf("%s: / %v, /dev %v", c.name, m["/"].opts, m["/dev"].opts)
		}
	}
}

// TestRedTeam47r_SysctlWrites: no RunAs sandbox, laid-out root or not, can set a host-wide
// sysctl through its /proc (kernel.core_pattern, written back with its own value). A root
// provider's sandbox without RunAs is logged, not failed: its uid is host root behind a
// user namespace, which the kernel's sysctl permission check (the file's mode for euid
// GLOBAL_ROOT_UID, no capability) lets write them, since bwrap does not cover /proc/sys
// there; this is one more reason a root caller SHOULD set RunAs.
//
// Defence: RunAs (the sandbox's uid is not host root) and the proc mount bwrap makes.
func TestRedTeam47r_SysctlWrites(t *testing.T) {
	requireBwrap(t)
	requireRoot(t)
	f := newRoot47rFixture(t)
	p := newProvider(t, Options{NoCgroup: true})
	before, err := os.ReadFile("/proc/sys/kernel/core_pattern")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range root47rLayouts {
		r := run(t, p, f.spec(l, "sysctl"))
		if r.exit.Code != 0 {
			t.Fatalf("%s: exit %+v\n%s\n%s", l.name, r.exit, r.stdout, r.stderr)
		}
		for _, line := range strings.Split(r.stdout, "\n") {
			if !strings.HasPrefix(line, "ESCAPED") {
				continue
			}
			if l.runAs == nil {
				t.Logf("%s (host root inside, not a RunAs sandbox; not failed): %s", l.name, line)
			} else {
				t.Errorf("%s: %s", l.name, line)
			}
		}
	}
	if after, err := os.ReadFile("/proc/sys/kernel/core_pattern"); err != nil || !bytes.Equal(after, before) {
		t.Errorf("kernel.core_pattern changed: %q to %q (%v)", before, after, err)
	}
}
