package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/compute"
)

// A prestarted slot (compute.WarmOptions.PrestartEnv) runs its command at fill, not at
// claim: the command's exec, its runtime's start and whatever it does before it needs its
// job leave the claim path. What the command sees before its claim:
//
//   - the sandbox a cold start gives (namespaces, uid, rlimits applied while bwrap was held,
//     cgroup, seccomp, the shape's environment without the per-dispatch names), plus one
//     descriptor: the read end of its claim pipe, named by PrestartEnv;
//   - under the claim root, a read-only tmpfs holding only its own binary (when the shape
//     binds it there: the template's bind of argv[0], read-only, nosuid, nodev) and its
//     working directory, empty. Nothing of any dispatch.
//
// At claim the dispatch's tree is attached over that one (a recursive bind on the same mount
// point, which stacks on top and propagates into the sandbox as the unprestarted attach
// does), the secrets and output pipes are handed over, and only then one byte is written to
// the claim pipe. The command then re-enters its working directory (its old one is the
// covered tree's) and reads its job. EOF on the pipe (the slot discarded, its holder killed)
// means no job will come: it exits, and the slot is dead and never claimed.
//
// The command's binary is the template's: a claim whose spec binds another file at argv[0]
// (another path, or the same path replaced since fill) does not fit the slot.

// binIdentity is what names a bound binary's file: its path on the host and its inode's
// identity and times. A pinned binary is never rewritten in place; a new one is a new file.
type binIdentity struct {
	src          string
	dev, ino     uint64
	size         int64
	mtime, ctime unix.Timespec
	mode         uint32
	uid, gid     uint32
}

func identify(path string) (*binIdentity, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	return &binIdentity{src: path, dev: st.Dev, ino: st.Ino, size: st.Size, mtime: st.Mtim, ctime: st.Ctim,
		mode: st.Mode, uid: st.Uid, gid: st.Gid}, nil
}

// commandBind returns the bind of spec that puts argv[0] under the claim root, nil when
// argv[0] is not under it (a system program: part of the shape already).
func commandBind(spec compute.Spec, root string) (*compute.Bind, error) {
	if len(spec.Argv) == 0 || !underRoot(spec.Argv[0], root) {
		return nil, nil
	}
	for i := range spec.Binds {
		if spec.Binds[i].Dst == spec.Argv[0] {
			return &spec.Binds[i], nil
		}
	}
	return nil, fmt.Errorf("prestart: the command %s is under the claim root but no bind puts it there", spec.Argv[0])
}

// prestart attaches the command's tree (its binary, its working directory) to the slot's
// mount point and lets the held sandbox exec the command, which then waits on its claim pipe.
func (s *Slot) prestart(ctx context.Context, tmpl compute.Spec) error {
	b, err := commandBind(tmpl, s.opts.ClaimRoot)
	if err != nil {
		return err
	}
	var binds []compute.Bind
	if b != nil {
		if b.Writable {
			return fmt.Errorf("prestart: the command's bind %s is writable", b.Dst)
		}
		if s.bin, err = identify(b.Src); err != nil {
			return fmt.Errorf("prestart: %w", err)
		}
		binds = append(binds, compute.Bind{Src: b.Src, Dst: b.Dst})
	}
	if stageable(tmpl, s.opts) {
		// The claim's directories are made now and start in the command's tree (slotstage.go).
		staged, err := s.makeStage(tmpl)
		if err != nil {
			return err
		}
		binds = append(binds, staged...)
	}
	var dirs []string
	if underRoot(tmpl.Dir, s.opts.ClaimRoot) && tmpl.Dir != s.opts.ClaimRoot {
		dirs = append(dirs, strings.TrimPrefix(tmpl.Dir, s.opts.ClaimRoot+"/"))
	}
	if err := s.attachTree(binds, dirs); err != nil {
		return fmt.Errorf("prestart: %w", err)
	}
	// What the held sandbox runs now (bwrap): unreadable, the sandbox has ended already (bwrap
	// failed in its set-up), a dead slot whose claim says why; there is nothing to wait for.
	held, heldErr := exeOf(s.h.sandboxPID)
	err = release(s.blockW)
	s.blockW.Close()
	s.blockW = nil
	if err != nil {
		return fmt.Errorf("prestart: %w", err)
	}
	if heldErr == nil {
		if err := s.awaitCommand(ctx, held); err != nil {
			return fmt.Errorf("prestart: %w", err)
		}
	}
	return nil
}

// awaitSetup waits until the held sandbox has built its root and waits on --block-fd (fd
// blockFD in it), or has ended. bwrap reports the sandbox's pid (--info-fd) before the sandbox
// has even started its setup: its bind of the claim mount point at the claim root, remounted
// with bwrap's flags, comes later. Whatever the slot attaches to that shared mount point
// before then (the prestarted command's tree at fill, a claim's tree) propagates into a root
// still being built: stacked on the claim root between bwrap's bind and its remount, the
// remount hits the attached read-only tree and bwrap dies ("Can't bind mount .../claim on
// /newroot/agora: Unable to remount destination ...: Operation not permitted").
//
// The sandbox's /proc syscall file names the call it is blocked in: read(2) of its block
// descriptor is the last step of bwrap's setup. A file that cannot be read (the process
// gone) ends the wait: a sandbox that ended is a dead slot, as Alive and a claim say.
func (s *Slot) awaitSetup(ctx context.Context, blockFD int) error {
	if s.h.sandboxPID <= 0 {
		return nil // gone during setup already (errGone): nothing will run
	}
	want := fmt.Sprintf("%d 0x%x ", unix.SYS_READ, blockFD)
	path := "/proc/" + strconv.Itoa(s.h.sandboxPID) + "/syscall"
	return pollSandbox(ctx, setupTimeout, "finish its setup", func() bool {
		b, err := os.ReadFile(path)
		return err != nil || strings.HasPrefix(string(b), want) || heldExited(s.h.pid)
	})
}

// awaitCommand waits, after the held sandbox's release, until its first process runs the
// slot's command, or has ended: until it execs, that process is bwrap still, which applies
// the seccomp filter and enters the command's working directory after the release. A slot
// returned before then would be handed out with bwrap yet to enter that directory, which a
// staged slot makes the sandbox user's and the claiming dispatch re-owns (root's, 0700) while
// it fills it: bwrap would then die with "Can't chdir to /agora/workspace: Permission denied",
// and the claim would find the slot dead (1 fill in 4 under load). Returned, the
// slot's contract holds: its command runs, and touches nothing under the claim root before
// its claim. A sandbox that ended is a dead slot, as one that dies later: Alive says so and a
// claim fails with what it wrote (endedSaying).
//
// No event tells of an exec in another process, so the process's executable is looked at, at
// growing intervals (the gap is about a millisecond; a fill is off every claim's path). held
// is the file it ran before the release (bwrap's).
func (s *Slot) awaitCommand(ctx context.Context, held fileID) error {
	const limit = 30 * time.Second // a process this slow to exec is stopped or starved
	return pollSandbox(ctx, limit, "start its command", func() bool {
		id, err := exeOf(s.h.sandboxPID)
		return err != nil || id != held || heldExited(s.h.pid)
	})
}

// pollSandbox asks done, at growing intervals (20 µs doubling to 5 ms: the steps waited for
// take about a millisecond), until it says true, ctx ends, or limit passes (an error saying
// the sandbox did not do what within it). A held sandbox's progress has no event to wait on.
func pollSandbox(ctx context.Context, limit time.Duration, what string, done func() bool) error {
	deadline := time.Now().Add(limit)
	for wait := 20 * time.Microsecond; !done(); wait = min(2*wait, 5*time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("the sandbox did not %s within %v", what, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
	return nil
}

// fileID names a file by its device and inode.
type fileID struct{ dev, ino uint64 }

// exeOf names the file process pid runs (its /proc exe link, followed: root reads it for a
// process of any user namespace below its own).
func exeOf(pid int) (fileID, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/"+strconv.Itoa(pid)+"/exe", &st); err != nil {
		return fileID{}, err
	}
	return fileID{st.Dev, st.Ino}, nil
}

// endedSaying returns what a slot's sandbox that ended before its claim wrote to its standard
// error (bwrap's reason, when bwrap failed), for an error message: at most 512 bytes, quoted,
// and only then (nothing of any dispatch has reached the sandbox, so it holds none of its
// secrets). It reads without waiting; "" when there is nothing.
func (s *Slot) endedSaying() string {
	r := s.outR[1]
	if r == nil {
		return ""
	}
	rc, err := r.SyscallConn()
	if err != nil {
		return ""
	}
	// One read(2) on the pipe, which os.Pipe made non-blocking: what it holds, or EAGAIN,
	// at once (the sandbox's processes may hold the pipe still; a plain Read would wait for
	// them). Not a read deadline already past: Go's Read then fails before it reads at all
	// (so no claim would ever say anything).
	b := make([]byte, 512)
	n := 0
	_ = rc.Read(func(fd uintptr) bool {
		n, _ = unix.Read(int(fd), b)
		return true // never wait for more
	})
	if n <= 0 {
		return ""
	}
	return fmt.Sprintf(": %q", strings.TrimSpace(string(b[:n])))
}

// sameBinary refuses a claim of a prestarted slot whose spec binds another file at the
// command's path than the one the running command was started from.
func (s *Slot) sameBinary(spec compute.Spec) error {
	if s.goW == nil {
		return nil
	}
	b, err := commandBind(spec, s.opts.ClaimRoot)
	if err != nil {
		return err
	}
	if (b == nil) != (s.bin == nil) {
		return fmt.Errorf("%w: the command's binary is bound differently", ErrSlotShape)
	}
	if b == nil {
		return nil
	}
	id, err := identify(b.Src)
	if err != nil {
		return fmt.Errorf("%w: the command's binary: %v", ErrSlotShape, err)
	}
	if *id != *s.bin {
		return fmt.Errorf("%w: the command's binary %s is not the file the slot started (%s)", ErrSlotShape, b.Src, s.bin.src)
	}
	return nil
}

// attachTree builds a tree of binds and empty directories on a private staging tmpfs, makes
// it read-only and binds it recursively onto the slot's shared mount point (see attach).
//
// Once attached, the staging tmpfs stays mounted in the slot's directory until that is
// removed (removeSlotDir takes every mount under it, as after a holder killed mid-attach): an
// unmount waits out an RCU grace period (0.5-1.8 ms here, with the directory's removal after
// it), which a claim would pay before its dispatch runs. Only root reaches it (the slot's
// directory is root's, 0700), it is private (nothing mounted on it goes anywhere), and the
// attached copy does not depend on it.
func (s *Slot) attachTree(binds []compute.Bind, dirs []string) (err error) {
	stage, err := os.MkdirTemp(s.dir, "stage-")
	if err != nil {
		return err
	}
	mounted := false
	defer func() {
		if err != nil {
			if mounted {
				unix.Unmount(stage, unix.MNT_DETACH) // with the binds made in it
			}
			os.Remove(stage)
		}
	}()
	if err := unix.Mount("agora-claim", stage, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=64k,nr_inodes=4096"); err != nil {
		return fmt.Errorf("mount staging tmpfs: %w", err)
	}
	mounted = true
	if err := unix.Mount("", stage, "", unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make staging private: %w", err)
	}
	for _, d := range dirs {
		if err := noSymlinkBelow(stage, d); err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Join(stage, d), 0o755); err != nil {
			return err
		}
	}
	for _, b := range binds {
		rel := strings.TrimPrefix(strings.TrimPrefix(b.Dst, s.opts.ClaimRoot), "/")
		if err := bindInto(stage, rel, b); err != nil {
			return err
		}
	}
	if err := unix.Mount("", stage, "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=64k,nr_inodes=4096"); err != nil {
		return fmt.Errorf("make staging read-only: %w", err)
	}
	target := "/proc/self/fd/" + strconv.Itoa(int(s.root.Fd()))
	if err := unix.Mount(stage, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("attach: %w", err)
	}
	return nil
}
