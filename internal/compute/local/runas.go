package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/compute"
)

// privateRoot is where a RunAs sandbox's bind sources are bound, by root, in a mount
// namespace that only its bwrap inherits.
//
// bwrap resolves every bind source with realpath(3) as the user it runs as, --bind-fd
// included (bubblewrap 0.8 to 0.11 read the descriptor's path back from /proc/self/fd and
// walk it), so a source under a directory that user cannot search, such as AGORA_HOME
// (0700, root), is out of its reach however it is passed. Binding each source here first
// gives bwrap a path anyone can search while the host's view stays as it was: the mount
// namespace, and every bind in it, goes away with the sandbox. Only the sources' own modes
// then decide what the sandbox user may read or write. On the host the directory stays an
// empty mount point.
const privateRoot = "/run/agora-sandbox"

// startBwrapAs starts a bwrap sandbox as s.RunAs, blocked like any other (startBlocked).
// Its rlimits are set with prlimit(2) from this thread with its real uid and gid switched to
// the sandbox user's for the call (asRealUser): the kernel lets a process whose real ids are
// the target's set its limits without CAP_SYS_RESOURCE, which containers commonly drop.
// (prlimit(1) exec'd inside the sandbox did this before, at ~1.2 ms a dispatch.)
//
// The start runs on a goroutine locked to its own OS thread (onOwnThread), in a mount
// namespace of that thread alone. The runtime never clones new threads from a locked one.
// The goroutine lives as long as the sandbox: bwrap's parent is this thread, and its
// parent-death signal (Pdeathsig, --die-with-parent) fires when the thread ends.
func (p *Provider) startBwrapAs(ctx context.Context, s compute.Spec, l limits) (*handle, error) {
	if err := ensurePrivateRoot(); err != nil {
		return nil, err
	}
	type started struct {
		h   *handle
		err error
	}
	res := make(chan started, 1)
	onOwnThread(func() {
		h, err := p.startInPrivateNS(ctx, s, l)
		res <- started{h, err}
		if err == nil {
			<-h.done
		}
		if !s.Network {
			// Made while nothing starts here, for the next start to take.
			p.netns.fill()
		}
	})
	r := <-res
	return r.h, r.err
}

// onOwnThread runs fn on a new goroutine locked to an OS thread other than the process's
// main thread, and never unlocks it: the runtime ends the thread when fn returns. The
// main thread is avoided because the runtime cannot end it (it would keep fn's mount
// namespace, and the binds in it, for the life of the process) and because /proc/<pid>
// shows its namespaces to every reader.
func onOwnThread(fn func()) {
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() != unix.Getpid() {
			fn()
			return
		}
		// Held here, the main thread cannot run the goroutine below, which therefore
		// locks another one; then the main thread is handed back untouched.
		locked := make(chan struct{})
		go func() {
			runtime.LockOSThread()
			close(locked)
			fn()
		}()
		<-locked
		runtime.UnlockOSThread()
	}()
}

// startInPrivateNS MUST run on a locked OS thread: it moves that thread into a new mount
// namespace.
func (p *Provider) startInPrivateNS(ctx context.Context, s compute.Spec, l limits) (*handle, error) {
	if err := enterPrivateNS(unix.MS_PRIVATE); err != nil {
		return nil, err
	}
	staged, err := stageSystem(s)
	if err != nil {
		return nil, err
	}
	if f := p.takeNetNS(s); f != nil {
		// A failed join leaves the thread where it was: bwrap makes the namespace itself.
		staged.netns = joinNetNS(f) == nil
	}
	binds, err := bindSources(s.Binds)
	if err != nil {
		return nil, err
	}
	s.Binds = binds
	if staged.root, err = layOutRoot(p.system, staged, binds, s.RunAs); err != nil {
		return nil, err
	}
	return p.startBlocked(ctx, s, l, staged)
}

// enterPrivateNS moves this (locked) thread into a new mount namespace whose mounts are
// private (a cold sandbox) or slaves of the host's (propagation MS_SLAVE: a warm slot, which
// must receive the claim's tree from the host). Either way nothing mounted from here on
// propagates to the host's namespace.
func enterPrivateNS(propagation uintptr) error {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("create a private mount namespace: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|propagation, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	if err := unix.Mount("agora-sandbox", privateRoot, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC,
		"mode=0755,size=64k,nr_inodes=4096"); err != nil {
		return fmt.Errorf("mount a tmpfs on %s: %w", privateRoot, err)
	}
	return nil
}

// startHeldAs starts a held sandbox (a warm slot) as s.RunAs, as startBwrapAs does a cold
// one: on a thread of its own in a mount namespace that is a slave of the host's. The
// thread stays until the handle is done.
func (p *Provider) startHeldAs(ctx context.Context, s compute.Spec, l limits, out []*os.File) (*handle, *os.File, error) {
	if err := ensurePrivateRoot(); err != nil {
		return nil, nil, err
	}
	type started struct {
		h      *handle
		blockW *os.File
		err    error
	}
	res := make(chan started, 1)
	onOwnThread(func() {
		var r started
		if r.err = enterPrivateNS(unix.MS_SLAVE); r.err == nil {
			// Staged as a cold sandbox's are: a claimed slot's sandbox is the cold one.
			var staged stagedSystem
			if staged, r.err = stageSystem(s); r.err == nil {
				var binds []compute.Bind
				if binds, r.err = bindPrivately(s.Binds); r.err == nil {
					s.Binds = binds
					r.h, r.blockW, r.err = p.startHeld(ctx, s, l, out, staged)
				}
			}
		}
		res <- r
		if r.err == nil {
			<-r.h.done
		}
	})
	r := <-res
	return r.h, r.blockW, r.err
}

// asRealUser runs fn with this OS thread's real uid and gid set to u's, then sets them back
// to root's. It MUST run on a locked OS thread of a root process (the credentials are the
// thread's: the raw syscalls, unlike syscall.Setresuid, change no other thread).
//
// Only the real ids change: the effective and saved ids stay 0, so the thread keeps its
// capabilities and the process stays undumpable to u. While they are switched, a process
// of u could signal this thread; the only ones are the sandbox being limited, held by
// bwrap's --block-fd before any of its command runs, and bwrap (each dispatch leases a uid
// of its own).
func asRealUser(u *compute.HostUser, fn func() error) error {
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(u.GID), ^uintptr(0), ^uintptr(0)); e != 0 {
		return fmt.Errorf("switch real gid to %d: %w", u.GID, e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(u.UID), ^uintptr(0), ^uintptr(0)); e != 0 {
		_ = restoreRealIDs()
		return fmt.Errorf("switch real uid to %d: %w", u.UID, e)
	}
	err := fn()
	if rerr := restoreRealIDs(); rerr != nil {
		return errors.Join(err, rerr)
	}
	return err
}

func restoreRealIDs() error {
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, 0, ^uintptr(0), ^uintptr(0)); e != 0 {
		return fmt.Errorf("restore real uid 0: %w", e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, 0, ^uintptr(0), ^uintptr(0)); e != 0 {
		return fmt.Errorf("restore real gid 0: %w", e)
	}
	return nil
}

// bindPrivately binds each source at privateRoot/<index> and returns the binds rewritten to
// those paths. The caller chose the sources (they are not sandbox-controlled), so following
// a symlink in them is what bwrap would have done too.
func bindPrivately(binds []compute.Bind) ([]compute.Bind, error) {
	out := make([]compute.Bind, len(binds))
	for i, b := range binds {
		fi, err := os.Stat(b.Src)
		if err != nil {
			return nil, fmt.Errorf("bind %s: %w", b.Src, err)
		}
		dst := filepath.Join(privateRoot, strconv.Itoa(i))
		if err := mountPoint(dst, fi.IsDir()); err != nil {
			return nil, fmt.Errorf("bind %s: %w", b.Src, err)
		}
		if err := unix.Mount(b.Src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return nil, fmt.Errorf("bind %s: %w", b.Src, err)
		}
		out[i] = compute.Bind{Src: dst, Dst: b.Dst, Writable: b.Writable}
	}
	return out, nil
}

// ensurePrivateRoot creates the mount point on the host once. It must be a directory of
// root's, not a link: the private namespace mounts over it.
func ensurePrivateRoot() error {
	err := os.Mkdir(privateRoot, 0o755)
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create %s (the mount point for sandboxes run as another user): %w", privateRoot, err)
	}
	fi, err := os.Lstat(privateRoot)
	if err != nil {
		return fmt.Errorf("check %s: %w", privateRoot, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || st.Uid != 0 {
		return fmt.Errorf("%s is not a directory owned by root; remove it and retry", privateRoot)
	}
	return nil
}
