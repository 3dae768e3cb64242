package local

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute"
)

// Attacks on the staged /etc and /dev of a sandbox run as another host user (stageSystem):
// an agent inside tries to write them, remount or unmount them, reach other ptys through
// the devpts instance root mounted for it, and the host is checked for what staging leaves
// behind. Each attack also runs against the layout bwrap builds itself (RunAs nil), which
// is the baseline the staged one must match.

// stageProbeEnv switches the test binary into one of the probes below (TestMain).
const stageProbeEnv = "AGORA_REDTEAM_STAGE_PROBE"

func stageProbe(mode string, args []string) int {
	switch mode {
	case "attack":
		attackStaged()
		return 0
	case "tree":
		return treeProbe()
	case "tree47":
		return tree47Probe(args)
	case "root47r":
		return root47rProbe(args)
	case "mountinfo":
		b, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil {
			fmt.Println("ERR", err)
			return 1
		}
		os.Stdout.Write(b)
		return 0
	case "pty-hold":
		// Open a pty, print its number and /dev/pts's device, then hold it until the file
		// args[0] exists (the test makes it once it has looked).
		m, n, err := openPty()
		if err != nil {
			fmt.Println("ERR openpty:", err)
			return 1
		}
		defer m.Close()
		fmt.Printf("pty %d dev %d\nready\n", n, statDev("/dev/pts"))
		for {
			if _, err := os.Stat(args[0]); err == nil {
				return 0
			}
			time.Sleep(10 * time.Millisecond) // the sandbox has no other event from the host
		}
	case "pty-peek":
		// List /dev/pts, print its device, and try to open each of args (pty paths).
		ents, _ := os.ReadDir("/dev/pts")
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		fmt.Printf("entries %s\ndev %d\netcdev %d\n", strings.Join(names, ","), statDev("/dev/pts"), statDev("/etc"))
		for _, p := range args {
			if f, err := os.OpenFile(p, os.O_RDWR|unix.O_NOCTTY, 0); err == nil {
				f.Close()
				fmt.Println("ESCAPED opened", p)
			} else {
				fmt.Println("blocked open", p+":", err)
			}
		}
		return 0
	case "tty":
		attackTTY()
		return 0
	default:
		fmt.Fprintln(os.Stderr, "unknown stage probe", mode)
		return 2
	}
}

func statDev(p string) uint64 {
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		return 0
	}
	return st.Dev
}

// openPty opens /dev/ptmx, unlocks the slave and returns the master and its number.
func openPty() (*os.File, int, error) {
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, 0, err
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		return nil, 0, err
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		m.Close()
		return nil, 0, err
	}
	return m, n, nil
}

// try prints ESCAPED when an attack succeeded, blocked otherwise.
func try(name string, err error) {
	if err == nil {
		fmt.Println("ESCAPED", name)
	} else {
		fmt.Printf("blocked %s: %v\n", name, err)
	}
}

func createFile(p string) error {
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err == nil {
		f.Close()
	}
	return err
}

func openWrite(p string, flag int) error {
	f, err := os.OpenFile(p, os.O_WRONLY|flag, 0)
	if err == nil {
		f.Close()
	}
	return err
}

// attackStaged is every write, mount and escape attempt on /etc and /dev an agent without
// capabilities can make, by system call. None may succeed.
func attackStaged() {
	fmt.Println("uid", os.Getuid())
	// A descriptor of the private root (a staged directory, a bind source) left open into
	// the sandbox would reach it whatever the mounts say.
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		for _, e := range ents {
			n, _ := strconv.Atoi(e.Name())
			target, err := os.Readlink("/proc/self/fd/" + e.Name())
			if n > 2 && err == nil && !strings.HasPrefix(target, "anon_inode:") && !strings.HasSuffix(target, "/fd") {
				fmt.Printf("ESCAPED inherited fd %d -> %s\n", n, target)
			}
		}
	}
	// /etc: plant a preload, replace or edit the account files, add files and links.
	try("create /etc/ld.so.preload", createFile("/etc/ld.so.preload"))
	try("symlink /etc/ld.so.preload", os.Symlink("/tmp/evil.so", "/etc/ld.so.preload"))
	try("append /etc/passwd", openWrite("/etc/passwd", os.O_APPEND))
	try("truncate /etc/hosts", unix.Truncate("/etc/hosts", 0))
	try("open-trunc /etc/group", openWrite("/etc/group", os.O_TRUNC))
	try("unlink /etc/passwd", unix.Unlink("/etc/passwd"))
	try("rename /etc/passwd", unix.Rename("/etc/passwd", "/etc/passwd-"))
	try("rename over /etc/passwd", func() error {
		if err := os.WriteFile("/tmp/passwd", []byte("root::0:0::/:/bin/sh\n"), 0o644); err != nil {
			return fmt.Errorf("(setup) %w", err)
		}
		return unix.Rename("/tmp/passwd", "/etc/passwd")
	}())
	try("mkdir /etc/ld.so.conf.d", unix.Mkdir("/etc/ld.so.conf.d", 0o755))
	try("create /etc/alternatives/evil", createFile("/etc/alternatives/evil"))
	try("unlink in /etc/alternatives", func() error {
		ents, err := os.ReadDir("/etc/alternatives")
		if err != nil || len(ents) == 0 {
			return fmt.Errorf("(nothing to unlink) %v", err)
		}
		return unix.Unlink(filepath.Join("/etc/alternatives", ents[0].Name()))
	}())
	try("create /etc/ssl/certs/evil.pem", createFile("/etc/ssl/certs/evil.pem"))
	try("chown /etc", unix.Chown("/etc", os.Getuid(), os.Getgid()))
	try("setxattr /etc/passwd", unix.Setxattr("/etc/passwd", "user.x", []byte("x"), 0))
	try("utimes /etc/passwd", unix.UtimesNano("/etc/passwd", []unix.Timespec{{}, {}}))

	// /dev: new nodes, replaced links, the devpts instance's ptmx.
	try("mknod /dev/mem", unix.Mknod("/dev/mem", unix.S_IFCHR|0o666, int(unix.Mkdev(1, 1))))
	try("mknod /dev/sda", unix.Mknod("/dev/sda", unix.S_IFBLK|0o666, int(unix.Mkdev(8, 0))))
	try("mknod /dev/shm/mem", unix.Mknod("/dev/shm/mem", unix.S_IFCHR|0o666, int(unix.Mkdev(1, 1))))
	try("mknod /tmp/mem", unix.Mknod("/tmp/mem", unix.S_IFCHR|0o666, int(unix.Mkdev(1, 1))))
	try("mknod fifo /dev/evil", unix.Mknod("/dev/evil", unix.S_IFIFO|0o666, 0))
	try("create /dev/evil", createFile("/dev/evil"))
	try("mkdir /dev/evil", unix.Mkdir("/dev/evil", 0o755))
	try("symlink /dev/evil", os.Symlink("/tmp", "/dev/evil"))
	try("unlink /dev/null", unix.Unlink("/dev/null"))
	try("unlink /dev/ptmx", unix.Unlink("/dev/ptmx"))
	try("rename /dev/ptmx", unix.Rename("/dev/ptmx", "/dev/ptmx-"))
	try("rmdir /dev/pts", unix.Rmdir("/dev/pts"))
	try("create /dev/pts/evil", createFile("/dev/pts/evil"))
	try("mkdir /dev/pts/evil", unix.Mkdir("/dev/pts/evil", 0o755))
	try("mknod /dev/pts/9", unix.Mknod("/dev/pts/9", unix.S_IFCHR|0o666, int(unix.Mkdev(136, 9))))
	// The devpts instance is the sandbox's own: in bwrap's layout its user namespace owns
	// it and may chmod it; staged, host root does. Either way no one else's.
	fmt.Println("own-instance chown /dev/pts/ptmx:", unix.Chown("/dev/pts/ptmx", os.Getuid(), os.Getgid()))
	fmt.Println("own-instance chmod /dev/pts:", unix.Chmod("/dev/pts", 0o755))
	fmt.Println("own-instance chmod /dev/pts/ptmx:", unix.Chmod("/dev/pts/ptmx", 0o666))
	// chmod to the mode a node already has: success shows the power to change it (chmod
	// 000 /dev/null, for every process of the host) without changing anything.
	for _, p := range []string{"/dev", "/dev/null", "/dev/zero", "/dev/full",
		"/dev/random", "/dev/urandom", "/dev/tty", "/etc/passwd", "/etc", "/etc/alternatives"} {
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			fmt.Printf("blocked chmod %s: (stat) %v\n", p, err)
			continue
		}
		try("chmod "+p, unix.Chmod(p, st.Mode&0o7777))
	}

	// Mounts: make /etc, /dev or / writable again, unmount a staged bind to reveal what is
	// below it, mount a devpts or tmpfs of one's own, clone or move a tree.
	for _, p := range []string{"/etc", "/etc/passwd", "/etc/alternatives", "/dev", "/dev/null", "/dev/pts", "/"} {
		try("remount-rw "+p, unix.Mount("", p, "", unix.MS_REMOUNT|unix.MS_BIND, ""))
		try("remount "+p, unix.Mount("", p, "", unix.MS_REMOUNT, ""))
		try("umount "+p, unix.Unmount(p, 0))
		try("umount-detach "+p, unix.Unmount(p, unix.MNT_DETACH))
		try("mount_setattr clear ro "+p, unix.MountSetattr(unix.AT_FDCWD, p, unix.AT_RECURSIVE,
			&unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}))
	}
	try("remount devpts options", unix.Mount("devpts", "/dev/pts", "devpts", unix.MS_REMOUNT, "mode=666,ptmxmode=0666,gid=0"))
	_ = os.Mkdir("/tmp/mnt", 0o755)
	try("mount devpts newinstance", unix.Mount("devpts", "/tmp/mnt", "devpts", 0, "newinstance,ptmxmode=0666"))
	try("mount devpts shared", unix.Mount("devpts", "/tmp/mnt", "devpts", 0, ""))
	try("mount tmpfs on /etc", unix.Mount("tmpfs", "/etc", "tmpfs", 0, ""))
	try("mount tmpfs on /dev", unix.Mount("tmpfs", "/dev", "tmpfs", 0, ""))
	try("bind /tmp on /etc", unix.Mount("/tmp", "/etc", "", unix.MS_BIND, ""))
	try("rbind /dev to /tmp/mnt", unix.Mount("/dev", "/tmp/mnt", "", unix.MS_BIND|unix.MS_REC, ""))
	try("move /dev/pts", unix.Mount("/dev/pts", "/tmp/mnt", "", unix.MS_MOVE, ""))
	try("open_tree clone /etc", func() error {
		fd, err := unix.OpenTree(unix.AT_FDCWD, "/etc", unix.OPEN_TREE_CLONE|unix.AT_RECURSIVE)
		if err == nil {
			unix.Close(fd)
		}
		return err
	}())
	try("move_mount /dev/pts", func() error {
		fd, err := unix.OpenTree(unix.AT_FDCWD, "/dev/pts", 0)
		if err != nil {
			return fmt.Errorf("(open_tree) %w", err)
		}
		defer unix.Close(fd)
		return unix.MoveMount(fd, "", unix.AT_FDCWD, "/tmp/mnt", unix.MOVE_MOUNT_F_EMPTY_PATH)
	}())
	for _, fstype := range []string{"devpts", "tmpfs", "proc"} {
		try("fsopen "+fstype, func() error {
			fd, err := unix.Fsopen(fstype, 0)
			if err == nil {
				unix.Close(fd)
			}
			return err
		}())
	}
	try("fspick /dev/pts", func() error {
		fd, err := unix.Fspick(unix.AT_FDCWD, "/dev/pts", 0)
		if err == nil {
			unix.Close(fd)
		}
		return err
	}())
	try("pivot_root", unix.PivotRoot("/tmp", "/tmp/mnt"))
	try("chroot", unix.Chroot("/tmp"))
	try("unshare mount ns", unix.Unshare(unix.CLONE_NEWNS))
	try("unshare user ns", unix.Unshare(unix.CLONE_NEWUSER))
	// A handle of /etc (the staged tmpfs) opened back, the way to its parent: the private
	// root with the worker binary and the binds.
	try("open_by_handle_at /etc", func() error {
		h, mountID, err := unix.NameToHandleAt(unix.AT_FDCWD, "/etc", 0)
		if err != nil {
			return fmt.Errorf("(name_to_handle_at) %w", err)
		}
		_ = mountID
		mfd, err := unix.Open("/etc", unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			return fmt.Errorf("(open) %w", err)
		}
		defer unix.Close(mfd)
		fd, err := unix.OpenByHandleAt(mfd, h, unix.O_RDONLY)
		if err == nil {
			unix.Close(fd)
		}
		return err
	}())
	// The private root is not in the sandbox at all, nor /etc's secrets beside the staged
	// entries.
	for _, p := range []string{privateRoot, privateRoot + "/0", "/oldroot", "/newroot", "/run",
		"/etc/shadow", "/etc/gshadow", "/etc/ssl/private", "/etc/gitconfig", "/etc/sudoers"} {
		_, err := os.Lstat(p)
		try("see "+p, err)
	}

	// What the sandbox sees after all of it.
	if _, err := os.Lstat("/etc/ld.so.preload"); err == nil {
		fmt.Println("ESCAPED /etc/ld.so.preload exists")
	}
	if b, err := os.ReadFile("/etc/passwd"); err == nil {
		fmt.Println("passwd-size", len(b))
	}
	var st unix.Stat_t
	if err := unix.Stat("/dev/null", &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != unix.Mkdev(1, 3) {
		fmt.Println("ESCAPED /dev/null is no longer the null device", err)
	}
	if ents, err := os.ReadDir("/dev"); err == nil {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		fmt.Println("dev-entries", strings.Join(names, ","))
	}
}

// attackTTY: push input into a terminal through TIOCSTI, or take one over as the
// controlling terminal, from the new devpts instance or the host's /dev/tty.
func attackTTY() {
	_, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	try("open /dev/tty", err)
	c := byte('x')
	sti := func(fd int) error {
		_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TIOCSTI, uintptr(unsafe.Pointer(&c)))
		if e != 0 {
			return e
		}
		return nil
	}
	for fd := 0; fd <= 2; fd++ {
		try(fmt.Sprintf("TIOCSTI on fd %d", fd), sti(fd))
	}
	m, n, err := openPty()
	if err != nil {
		fmt.Println("ERR openpty:", err)
		return
	}
	defer m.Close()
	fmt.Println("openpty ok", n)
	try("TIOCSTI on a pty master not our terminal", sti(int(m.Fd())))
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		fmt.Println("ERR open slave:", err)
		return
	}
	defer s.Close()
	try("TIOCSTI on a pty slave not our terminal", sti(int(s.Fd())))
	try("TIOCCONS redirect console", unix.IoctlSetInt(int(s.Fd()), unix.TIOCCONS, 0))
}

// layout is one way a sandbox's /etc and /dev are made.
type layout struct {
	name  string
	runAs *compute.HostUser
	// unstaged adds a bind into /etc and one into /dev, so bwrap builds both as it did
	// for every RunAs sandbox before staging (--ro-bind-try and --dev).
	unstaged bool
}

// layouts: staged by root in the private mount namespace; the old layout of a RunAs
// sandbox, which staging must match; and a root provider's sandbox without RunAs, whose
// sandbox user is host root (see TestRedTeamStage_WriteAndMountAttacks).
var (
	stagedLayout = layout{"staged", testRunAs, false}
	oldLayout    = layout{"runas-bwrap", testRunAs, true}
	rootLayout   = layout{"root-bwrap", nil, false}
	layouts      = []layout{stagedLayout, oldLayout, rootLayout}
)

// unstagedMarkers are the mount points of oldLayout's extra binds.
var unstagedMarkers = []string{"/etc/agora-rt-unstaged", "/dev/agora-rt-unstaged"}

// stageSpec is a spec running the test binary as probe mode inside a sandbox of l.
func stageSpec(t *testing.T, id, mode string, l layout, network bool, args ...string) compute.Spec {
	t.Helper()
	s := compute.Spec{
		ID:      id,
		Argv:    append([]string{"/probe"}, args...),
		Env:     []string{"PATH=/usr/bin:/bin", stageProbeEnv + "=" + mode},
		Binds:   []compute.Bind{probeBind(t)},
		Network: network,
		RunAs:   l.runAs,
		Limits:  compute.Limits{Timeout: 30 * time.Second},
	}
	if l.unstaged {
		src := filepath.Join(t.TempDir(), "marker")
		if err := os.WriteFile(src, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, dst := range unstagedMarkers {
			s.Binds = append(s.Binds, compute.Bind{Src: src, Dst: dst})
		}
	}
	return s
}

// TestRedTeamStage_WriteAndMountAttacks: an agent inside tries every write to /etc and
// /dev and every mount, unmount, remount and tree-cloning call on them. All must fail in
// the staged layout and in the old one of a RunAs sandbox, and the host's /etc must be
// untouched.
//
// A root provider's sandbox without RunAs (rootLayout) is host root behind its user
// namespace: it owns the host's device nodes bound into its /dev and can chmod them on
// the host (chmod 000 /dev/null). That predates staging and is why a root caller SHOULD set
// RunAs (compute.Spec.RunAs); it is logged here, not failed. The staged layout must not
// have it.
func TestRedTeamStage_WriteAndMountAttacks(t *testing.T) {
	requireBwrap(t)
	requireRoot(t)
	p := newProvider(t, Options{NoCgroup: true})
	passwd, err := os.ReadFile("/etc/passwd")
	if err != nil {
		t.Fatal(err)
	}
	preloadBefore := fileExists("/etc/ld.so.preload")
	for _, l := range layouts {
		for _, network := range []bool{false, true} {
			r := run(t, p, stageSpec(t, "rt-stage-attack", "attack", l, network))
			name := fmt.Sprintf("%s network=%v", l.name, network)
			if r.exit.Code != 0 || !strings.Contains(r.stdout, "uid 65534\n") {
				t.Fatalf("%s: probe exit %+v\nstdout:\n%s\nstderr:\n%s", name, r.exit, r.stdout, r.stderr)
			}
			var escaped []string
			for _, line := range strings.Split(r.stdout, "\n") {
				if strings.HasPrefix(line, "ESCAPED") {
					escaped = append(escaped, line)
				}
			}
			if l.runAs == nil {
				if len(escaped) > 0 {
					t.Logf("%s (host root inside, not a RunAs sandbox; not failed): %q", name, escaped)
				}
			} else {
				for _, e := range escaped {
					t.Errorf("%s: %s", name, e)
				}
			}
			if !strings.Contains(r.stdout, fmt.Sprintf("passwd-size %d\n", len(passwd))) {
				t.Errorf("%s: /etc/passwd inside changed or unreadable:\n%s", name, r.stdout)
			}
			if testing.Verbose() && l == stagedLayout && !network {
				t.Logf("%s:\n%s", name, r.stdout)
			}
		}
	}
	if after, err := os.ReadFile("/etc/passwd"); err != nil || !bytes.Equal(after, passwd) {
		t.Errorf("host /etc/passwd changed: %v", err)
	}
	if !preloadBefore && fileExists("/etc/ld.so.preload") {
		t.Errorf("host /etc/ld.so.preload appeared")
	}
}

// mountEntry is one mount of a mountinfo: its per-mount options, file system type, source,
// super options and root within the file system.
type mountEntry struct {
	opts  map[string]bool
	fs    string
	super string
	root  string
	src   string
}

func parseMountinfo(s string) map[string]mountEntry {
	m := map[string]mountEntry{}
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		f := strings.Fields(line)
		i := slices.Index(f, "-")
		if len(f) < 6 || i < 0 || i+3 >= len(f) {
			continue
		}
		e := mountEntry{opts: map[string]bool{}, fs: f[i+1], src: f[i+2], super: f[i+3], root: f[3]}
		for _, o := range strings.Split(f[5], ",") {
			e.opts[o] = true
		}
		m[f[4]] = e // the last mount on a point is the one seen
	}
	return m
}

// TestRedTeamStage_MountFlagsNoWeakerThanBwraps: every mount at or below /etc and /dev in
// the staged sandbox is read-only, nosuid, nodev and noexec wherever bwrap's own layout
// is; /etc and everything in it is read-only and nodev, /dev read-only, each devpts a
// fresh instance with bwrap's options, and nothing of the private root is mounted.
func TestRedTeamStage_MountFlagsNoWeakerThanBwraps(t *testing.T) {
	requireBwrap(t)
	requireRoot(t)
	p := newProvider(t, Options{NoCgroup: true})
	for _, network := range []bool{false, true} {
		got := map[string]map[string]mountEntry{}
		for _, l := range layouts {
			r := run(t, p, stageSpec(t, "rt-stage-mi", "mountinfo", l, network))
			if r.exit.Code != 0 {
				t.Fatalf("%s: exit %+v: %s %s", l.name, r.exit, r.stdout, r.stderr)
			}
			got[l.name] = parseMountinfo(r.stdout)
			for _, m := range unstagedMarkers {
				delete(got[l.name], m)
			}
			if testing.Verbose() && !network && l != rootLayout {
				t.Logf("%s mountinfo:\n%s", l.name, r.stdout)
			}
		}
		staged := got[stagedLayout.name]
		if staged["/dev"].src != "agora-sandbox" || staged["/etc"].src != "agora-sandbox" {
			t.Fatalf("network %v: /etc and /dev were not staged: %+v %+v", network, staged["/etc"], staged["/dev"])
		}
		under := func(mp, dir string) bool { return mp == dir || strings.HasPrefix(mp, dir+"/") }
		for mp, e := range staged {
			if strings.HasPrefix(mp, privateRoot) || under(mp, "/oldroot") || under(mp, "/newroot") || under(mp, "/run") {
				t.Errorf("network %v: the sandbox has a mount at %s", network, mp)
			}
			if !under(mp, "/etc") && !under(mp, "/dev") {
				continue
			}
			if !e.opts["nosuid"] {
				t.Errorf("network %v: staged %s is not nosuid: %v", network, mp, e.opts)
			}
			if under(mp, "/etc") && (!e.opts["ro"] || !e.opts["nodev"]) {
				t.Errorf("network %v: staged %s is not ro,nodev: %v", network, mp, e.opts)
			}
			for _, base := range []layout{oldLayout, rootLayout} {
				b, ok := got[base.name][mp]
				if !ok {
					if mp != "/etc" {
						// A mount the old layout does not make: staging adds none but /etc.
						t.Errorf("network %v: staged mount %s (%s) has no counterpart in %s", network, mp, e.fs, base.name)
					}
					continue
				}
				for _, o := range []string{"ro", "nosuid", "nodev", "noexec"} {
					if b.opts[o] && !e.opts[o] {
						t.Errorf("network %v: %s is %s in %s but not staged: staged %v, %s %v", network, mp, o, base.name, e.opts, base.name, b.opts)
					}
				}
				if e.fs != b.fs || (e.fs != "tmpfs" && e.root != b.root) {
					t.Errorf("network %v: %s is %s %s staged, %s %s in %s", network, mp, e.fs, e.root, b.fs, b.root, base.name)
				}
			}
		}
		for _, base := range []layout{oldLayout, rootLayout} {
			for mp := range got[base.name] {
				if (under(mp, "/etc") || under(mp, "/dev")) && staged[mp].fs == "" {
					t.Errorf("network %v: %s mounts %s, the staged layout does not", network, base.name, mp)
				}
			}
		}
		built := got[oldLayout.name]
		if !staged["/dev"].opts["ro"] {
			t.Errorf("network %v: staged /dev is writable: %v", network, staged["/dev"].opts)
		}
		pts := staged["/dev/pts"]
		if pts.fs != "devpts" || pts.super != built["/dev/pts"].super || !pts.opts["noexec"] || !pts.opts["nosuid"] {
			t.Errorf("network %v: staged /dev/pts %+v, bwrap's %+v", network, pts, built["/dev/pts"])
		}
	}
}

// hostDevpts lists the device numbers of the host's devpts mounts.
func hostDevpts(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var devs []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 3 && strings.Contains(line, " - devpts ") {
			devs = append(devs, f[2])
		}
	}
	sort.Strings(devs)
	return devs
}

// TestRedTeamStage_DevptsIsolated: the devpts instance mounted by root for the sandbox is
// its own: it shows neither a pty of the host nor one of another sandbox running at the same
// time, and has a device number of its own.
func TestRedTeamStage_DevptsIsolated(t *testing.T) {
	requireBwrap(t)
	requireRoot(t)
	p := newProvider(t, Options{NoCgroup: true})
	// A pty of the host's.
	hm, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("SKIP: no host pty: %v", err)
	}
	defer hm.Close()
	hn, err := unix.IoctlGetInt(int(hm.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	_ = unix.IoctlSetPointerInt(int(hm.Fd()), unix.TIOCSPTLCK, 0)
	hostPts := fmt.Sprintf("/dev/pts/%d", hn)
	hostDev := statDev("/dev/pts")

	// Sandbox A holds a pty while sandbox B looks for it.
	var aOut, aErr syncBuffer
	release := t.TempDir()
	if err := os.Chmod(release, 0o755); err != nil { // the sandbox user looks in it
		t.Fatal(err)
	}
	sa := stageSpec(t, "rt-stage-pty-a", "pty-hold", stagedLayout, false, "/release/go")
	sa.Binds = append(sa.Binds, compute.Bind{Src: release, Dst: "/release"})
	sa.Stdout, sa.Stderr = &aOut, &aErr
	ha, err := p.Start(t.Context(), sa)
	if err != nil {
		t.Fatal(err)
	}
	agoratest.WaitFor(t, 20*time.Second, "sandbox A to hold a pty", func() bool {
		return strings.Contains(aOut.String(), "ready") || strings.Contains(aOut.String(), "ERR") || aErr.String() != ""
	})
	if !strings.Contains(aOut.String(), "ready") {
		ha.Wait()
		t.Fatalf("sandbox A cannot open a pty: %s %s", aOut.String(), aErr.String())
	}
	var aPty int
	var aDev uint64
	if _, err := fmt.Sscanf(aOut.String(), "pty %d dev %d", &aPty, &aDev); err != nil {
		t.Fatalf("sandbox A: %q: %v", aOut.String(), err)
	}
	for _, l := range layouts {
		b := run(t, p, stageSpec(t, "rt-stage-pty-b", "pty-peek", l, false, hostPts, fmt.Sprintf("/dev/pts/%d", aPty), "/dev/pts/0", "/dev/pts/1"))
		if b.exit.Code != 0 {
			t.Fatalf("%s: exit %+v %s %s", l.name, b.exit, b.stdout, b.stderr)
		}
		if strings.Contains(b.stdout, "ESCAPED") {
			t.Errorf("%s: sandbox B opened a pty not its own:\n%s", l.name, b.stdout)
		}
		if !strings.Contains(b.stdout, "entries ptmx\n") {
			t.Errorf("%s: sandbox B's /dev/pts is not a fresh instance:\n%s", l.name, b.stdout)
		}
		var bDev uint64
		for _, line := range strings.Split(b.stdout, "\n") {
			fmt.Sscanf(line, "dev %d", &bDev)
		}
		if bDev == 0 || bDev == aDev || bDev == hostDev {
			t.Errorf("%s: sandbox B's devpts device %d; A's %d, host's %d", l.name, bDev, aDev, hostDev)
		}
	}
	if aDev == hostDev || aDev == 0 {
		t.Errorf("sandbox A's devpts is the host's (%d)", aDev)
	}
	if err := os.WriteFile(filepath.Join(release, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if exit, err := ha.Wait(); err != nil || exit.Code != 0 {
		t.Errorf("sandbox A: %+v %v %s", exit, err, aErr.String())
	}
}

// TestRedTeamStage_TTYInjection: no TIOCSTI into a terminal that is not the sandbox's
// controlling one, no /dev/tty, no console redirection, in either layout.
func TestRedTeamStage_TTYInjection(t *testing.T) {
	requireBwrap(t)
	requireRoot(t)
	p := newProvider(t, Options{NoCgroup: true})
	for _, l := range layouts {
		r := run(t, p, stageSpec(t, "rt-stage-tty", "tty", l, false))
		if r.exit.Code != 0 || !strings.Contains(r.stdout, "openpty ok") {
			t.Fatalf("%s: exit %+v\n%s\n%s", l.name, r.exit, r.stdout, r.stderr)
		}
		for _, line := range strings.Split(r.stdout, "\n") {
			if strings.HasPrefix(line, "ESCAPED") {
				t.Errorf("%s: %s", l.name, line)
			}
		}
		if testing.Verbose() && l.runAs != nil {
			t.Logf("%s:\n%s", l.name, r.stdout)
		}
	}
}

// hostMountState is what the host's mount table and /run/agora-sandbox show of sandboxes.
func hostMountState(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/1/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, privateRoot) || strings.Contains(line, "agora-sandbox") {
			lines = append(lines, line)
		}
	}
	ents, err := os.ReadDir(privateRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		lines = append(lines, "entry "+e.Name())
	}
	self, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(self), "\n") {
		if strings.Contains(line, privateRoot) || strings.Contains(line, "agora-sandbox") {
			lines = append(lines, "self "+line)
		}
	}
	lines = append(lines, "devpts "+strings.Join(hostDevpts(t), ","))
	return strings.Join(lines, "\n")
}

// TestRedTeamStage_ConcurrentNoLeak: sandboxes staged at the same time each get their own
// tmpfs, /etc, /dev and devpts (none sees another's), an attacker among them changes
// nothing for the others, and when all have ended the host shows no mount, no entry in
// /run/agora-sandbox, no new devpts, and no thread of this process is left in a private
// namespace.
func TestRedTeamStage_ConcurrentNoLeak(t *testing.T) {
	requireBwrap(t)
	requireRoot(t)
	p := newProvider(t, Options{NoCgroup: true})
	if err := ensurePrivateRoot(); err != nil {
		t.Fatal(err)
	}
	before := hostMountState(t)
	const n = 4
	outs := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mode := "pty-peek"
			if i == 0 {
				mode = "attack"
			}
			var out, errOut syncBuffer
			s := stageSpec(t, "rt-stage-conc-"+strconv.Itoa(i), mode, stagedLayout, i%2 == 1, "/dev/pts/0")
			s.Stdout, s.Stderr = &out, &errOut
			h, err := p.Start(t.Context(), s)
			if err != nil {
				t.Errorf("sandbox %d: Start: %v", i, err)
				return
			}
			if exit, err := h.Wait(); err != nil || exit.Code != 0 {
				t.Errorf("sandbox %d: %+v %v %s", i, exit, err, errOut.String())
			}
			outs[i] = out.String()
		}()
	}
	wg.Wait()
	if strings.Contains(outs[0], "ESCAPED") {
		t.Errorf("the attacker among concurrent sandboxes escaped:\n%s", outs[0])
	}
	devs := map[string]int{}
	for i := 1; i < n; i++ {
		if strings.Contains(outs[i], "ESCAPED") || !strings.Contains(outs[i], "entries ptmx\n") {
			t.Errorf("sandbox %d saw another's pty:\n%s", i, outs[i])
		}
		for _, line := range strings.Split(outs[i], "\n") {
			if strings.HasPrefix(line, "dev ") || strings.HasPrefix(line, "etcdev ") {
				devs[line]++
			}
		}
	}
	for d, c := range devs {
		if c > 1 {
			t.Errorf("%d concurrent sandboxes share the file system of %s", c, d)
		}
	}
	agoratest.WaitFor(t, 10*time.Second, "the private mount namespaces to end", func() bool {
		return len(threadsSeeing(t, privateRoot)) == 0 && len(threadsSeeing(t, "agora-sandbox")) == 0
	})
	if after := hostMountState(t); after != before {
		t.Errorf("the host's mounts changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	fi, err := os.Lstat(privateRoot)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); !fi.IsDir() || st.Uid != 0 || fi.Mode().Perm() != 0o755 {
		t.Errorf("%s on the host: %v uid %d", privateRoot, fi.Mode(), st.Uid)
	}
}
