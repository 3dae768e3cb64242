package local

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/host"
)

// A warm slot is a bubblewrap sandbox started ahead of any dispatch: its namespaces,
// system mounts, limits and cgroup are in place and bwrap waits on --block-fd before it runs
// the worker. Everything a dispatch brings (its bundle, workspace, out directory, capability
// files, inputs, its secrets pipe and its output) reaches the slot only at claim:
//
//   - The sandbox's claim root (/agora) is a bind of the slot's own host directory, which the
//     host made a shared mount of its own; bwrap's mounts are slaves of the host's, so a tree
//     the host attaches there at claim appears in the sandbox and nothing the sandbox mounts
//     goes back. The tree is built on a private staging tmpfs first, each bind with the
//     flags bwrap gives a cold one (nosuid, nodev, read-only unless writable) and the tmpfs
//     itself read-only (a cold sandbox's / is), then attached in one recursive bind.
//   - The secrets travel on the slot's own pipe, fd 3 as in a cold sandbox; stdout and
//     stderr on pipes the slot copies to the dispatch's sinks from claim on.
//
// A slot is claimed once: [Provider.StartInSlot] marks it before anything else and refuses a
// second claim; a discarded or failed slot is killed and its directory removed. After a
// crash of the process that held slots, [ReapSlots] kills what is left and removes the
// directories: nothing there is ever claimed.

// ErrSlotShape means a spec does not fit a slot: it must start cold.
var ErrSlotShape = compute.ErrSlotShape

// ErrSlotClaimed means a slot was claimed (or discarded) before: slots are never reused.
var ErrSlotClaimed = errors.New("warm slot already claimed")

// Slot is one held sandbox. It implements warm.Slot.
type Slot struct {
	p       *Provider
	opts    compute.WarmOptions
	shape   string
	dir     string   // the slot's host directory
	root    *os.File // O_PATH handle on dir/claim, the shared mount point, pinned at fill
	hold    *os.File // dir/hold, flocked for the slot's whole life (see [ReapSlots])
	h       *handle
	blockW  *os.File
	secrets []*os.File // write ends of the slot's fd 3.. pipes
	outR    [2]*os.File
	// goW, for a prestarted slot, is the write end of the command's claim pipe (slotstart.go)
	// and bin the identity of the command's binary bound at fill; nil otherwise.
	goW *os.File
	bin *binIdentity
	// files are the slot's claim files (slotfiles.go): each place and the host file bound there.
	files map[string]string
	// ns is the sandbox's mount namespace, held open by the slot (holdNamespace); nil when
	// it could not be.
	ns *os.File
	// stage is the slot's stage directory when it staged ahead (slotstage.go), "" otherwise;
	// staged its directories by claim place. Both are set at fill.
	stage  string
	staged map[string]stagedDir

	mu      sync.Mutex
	claimed bool // guarded by mu
	taken   bool // guarded by mu: the stage was handed to a dispatch (TakeStage)
	// refs counts who keeps the slot's directory (guarded by mu): the slot until it is done,
	// and a taken stage until its dispatch releases it (unref).
	refs int
	// doneOnce lets go of the slot's own hold on its directory once, whichever of its
	// cleanup and its claim's monitor comes first.
	doneOnce sync.Once
	// monitored is set once the claim hands the handle to its monitor, which then owns it.
	monitored bool
}

// slotMeta is the file in a slot's directory naming its bwrap task, for [ReapSlots].
const slotMeta = "task"

// slotCgroup is the file in a slot's directory naming its task cgroup, for [ReapSlots].
const slotCgroup = "cgroup"

// slotHold is the file in a slot's directory its holder keeps flocked until the slot's
// directory is gone (through its claim's run): the kernel drops the lock with a holder
// killed with -9, and [ReapSlots] leaves every slot whose hold is still locked.
const slotHold = "hold"

func underRoot(p, root string) bool {
	return root != "" && (p == root || strings.HasPrefix(p, root+"/"))
}

// Shape implements warm.Slot.
func (s *Slot) Shape() string { return s.shape }

// Alive implements the pool's liveness check: false once the held sandbox has ended.
func (s *Slot) Alive() bool { return s.h != nil && !heldExited(s.h.pid) }

// Dir is the slot's host directory (for tests and stale sweeps).
func (s *Slot) Dir() string { return s.dir }

// TaskID is the held bwrap's task id.
func (s *Slot) TaskID() string { return s.h.TaskID() }

// NewSlot starts a sandbox of tmpl's shape and holds it. tmpl's binds under o.ClaimRoot
// are not bound now (their sources may not exist yet): the claim supplies them. Needs root
// (the host mounts the claim's tree). With RunAs the slot starts as the cold run-as path
// does, on a thread of its own, in a mount namespace that is a slave of the host's.
func (p *Provider) NewSlot(ctx context.Context, tmpl compute.Spec, o compute.WarmOptions) (*Slot, error) {
	v := tmpl
	v.Files = nil // only their number counts: the slot makes its own pipes
	if err := validateSpec(v); err != nil {
		return nil, fmt.Errorf("new warm slot: %w", err)
	}
	if tmpl.Sandbox == compute.SandboxNone {
		return nil, errors.New("new warm slot: sandbox none has nothing to start ahead")
	}
	if _, err := p.bwrapPath(); err != nil {
		return nil, fmt.Errorf("new warm slot: %w", err)
	}
	switch {
	case os.Geteuid() != 0:
		return nil, errors.New("new warm slot: only a provider running as root can attach a dispatch's files to a started sandbox")
	case o.ClaimRoot == "" || checkPath(o.ClaimRoot) != nil || o.ClaimRoot == "/":
		return nil, fmt.Errorf("new warm slot: claim root %q: want an absolute clean directory other than /", o.ClaimRoot)
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("new warm slot: %w", err)
	}
	dir, err := os.MkdirTemp(o.Dir, "slot-")
	if err != nil {
		return nil, fmt.Errorf("new warm slot: %w", err)
	}
	s := &Slot{p: p, opts: o, shape: compute.SlotShape(tmpl, o), dir: dir, refs: 1}
	if s.hold, err = lockHold(dir); err != nil {
		s.cleanup()
		return nil, fmt.Errorf("new warm slot: %w", err)
	}
	// The directory is a private mount of its own, so everything the slot mounts in it (its
	// claim mount point, the staging trees, its claim files) comes down in one unmount, one
	// RCU grace period, instead of one per mount (removeSlotDir).
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		s.cleanup()
		return nil, fmt.Errorf("new warm slot: bind %s: %w", dir, err)
	}
	if err := unix.Mount("", dir, "", unix.MS_PRIVATE, ""); err != nil {
		s.cleanup()
		return nil, fmt.Errorf("new warm slot: make %s private: %w", dir, err)
	}
	if err := s.start(ctx, tmpl); err != nil {
		if s.h != nil {
			s.h.abortHeld() // started, then failed: its bwrap and thread end now, not never
		}
		s.cleanup()
		return nil, fmt.Errorf("new warm slot: %w", err)
	}
	return s, nil
}

// start makes dir/claim a shared mount of its own and starts the held sandbox with it at
// the claim root.
func (s *Slot) start(ctx context.Context, tmpl compute.Spec) error {
	mp := filepath.Join(s.dir, "claim")
	if err := os.Mkdir(mp, 0o755); err != nil {
		return err
	}
	if err := unix.Mount(mp, mp, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s: %w", mp, err)
	}
	if err := unix.Mount("", mp, "", unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make %s private: %w", mp, err)
	}
	if err := unix.Mount("", mp, "", unix.MS_SHARED, ""); err != nil {
		return fmt.Errorf("make %s shared: %w", mp, err)
	}
	root, err := os.OpenFile(mp, unix.O_PATH|unix.O_NOFOLLOW|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	s.root = root
	spec := tmpl
	spec.ID = filepath.Base(s.dir)
	spec.Env = s.opts.ShapeEnv(tmpl.Env)
	spec.Binds = []compute.Bind{{Src: mp, Dst: s.opts.ClaimRoot, Writable: true}}
	for _, b := range tmpl.Binds {
		if s.opts.IsClaimFile(b) {
			var err error
			if b, err = s.claimFileBind(b); err != nil {
				return err
			}
		}
		if !underRoot(b.Dst, s.opts.ClaimRoot) {
			spec.Binds = append(spec.Binds, b)
		}
	}
	spec.Files = nil
	var give []*os.File
	for range tmpl.Files {
		r, w, err := os.Pipe()
		if err != nil {
			return err
		}
		give = append(give, r)
		s.secrets = append(s.secrets, w)
	}
	if s.opts.PrestartEnv != "" {
		r, w, err := os.Pipe()
		if err != nil {
			return err
		}
		give = append(give, r)
		s.goW = w
		spec.Env = append(spec.Env, s.opts.PrestartEnv+"="+strconv.Itoa(3+len(give)-1))
	}
	spec.Files = give
	defer func() {
		for _, f := range give {
			f.Close()
		}
	}()
	var outW [2]*os.File
	for i := range outW {
		r, w, err := os.Pipe()
		if err != nil {
			return err
		}
		s.outR[i], outW[i] = r, w
	}
	defer outW[0].Close()
	defer outW[1].Close()
	start := func(ctx context.Context, spec compute.Spec, l limits, out []*os.File) (*handle, *os.File, error) {
		return s.p.startHeld(ctx, spec, l, out, stagedSystem{})
	}
	if spec.RunAs != nil {
		start = s.p.startHeldAs
	}
	h, blockW, err := start(ctx, spec, resolveLimits(spec.Limits), outW[:])
	if err != nil {
		return err
	}
	s.h, s.blockW = h, blockW
	if err := s.awaitSetup(ctx, newFDLayout(len(spec.Files)).block); err != nil {
		return err
	}
	s.holdNamespace()
	if s.goW != nil {
		// The command starts now, blocked on its claim pipe, from a tree holding only its
		// binary and its working directory.
		if err := s.prestart(ctx, tmpl); err != nil {
			return err
		}
	}
	if h.cg != nil {
		// Named after the slot, not a dispatch: only ReapSlots can find it after a crash.
		if err := os.WriteFile(filepath.Join(s.dir, slotCgroup), []byte(h.cg.dir), 0o600); err != nil {
			return err
		}
	}
	// Written whole, then named: ReapSlots (or anyone) reading it meanwhile finds no file
	// rather than an empty or partial task id.
	tmp := filepath.Join(s.dir, slotMeta+".new")
	if err := os.WriteFile(tmp, []byte(h.TaskID()), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(s.dir, slotMeta))
}

// Discard implements warm.Slot: it kills a slot never claimed and removes its directory.
func (s *Slot) Discard() {
	s.mu.Lock()
	was := s.claimed
	s.claimed = true
	s.mu.Unlock()
	if was {
		return
	}
	if s.h != nil {
		s.h.abortHeld()
	}
	s.cleanup()
}

// cleanup closes what the slot holds on the host and removes its directory, letting go of
// its hold last; a stage taken by a dispatch keeps the directory until the dispatch releases
// it (unref).
func (s *Slot) cleanup() {
	for _, f := range append([]*os.File{s.blockW, s.goW, s.root, s.outR[0], s.outR[1]}, s.secrets...) {
		if f != nil {
			f.Close()
		}
	}
	s.done()
}

// done lets go of the slot's own hold on its directory (see refs), once.
func (s *Slot) done() { s.doneOnce.Do(s.unref) }

// lockHold makes dir's hold file and locks it for this process. The file is locked under
// another name and renamed to its own, so a hold file a sweep finds is always locked while
// its maker lives: a sweep between the create and the lock took a slot being made for a
// dead holder's and removed it (standbys sweep at every standby's exit).
func lockHold(dir string) (*os.File, error) {
	tmp := filepath.Join(dir, slotHold+".new")
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("hold: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("hold: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, slotHold)); err != nil {
		f.Close()
		return nil, fmt.Errorf("hold: %w", err)
	}
	return f, nil
}

// slotMakeGrace is how long a slot directory without a hold is taken for one being made
// (its maker creates the hold right after the directory); older, it was left half-made by a
// crash and is swept.
const slotMakeGrace = time.Minute

// holderLives reports whether slot directory d's hold is locked by a living holder. A
// directory without a hold counts as gone once it is older than slotMakeGrace (left
// half-made by a crash); a younger one is a slot being made, left to its maker.
func holderLives(d string) bool {
	f, err := os.OpenFile(filepath.Join(d, slotHold), os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, os.ErrNotExist) {
		fi, err := os.Lstat(d)
		return err == nil && time.Since(fi.ModTime()) < slotMakeGrace
	}
	if err != nil {
		return false
	}
	defer f.Close()
	return unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil
}

// removeSlotDir detaches whatever is mounted in a slot's directory and removes it. Not only
// the claim mount point: a holder killed while it attached a claim leaves the staging tmpfs
// mounted (in the host's namespace) with the dispatch's binds in it, and a removal must never
// reach through a bind into the files it shows. When the mounts cannot be
// listed or one stays, the directory is left in place.
func removeSlotDir(dir string) {
	mps, err := host.MountsUnder(dir)
	// Shallowest first: a lazy unmount takes every mount below its mount point with it, and
	// the slot's directory is a mount of its own (NewSlot), so its whole tree goes in one
	// unmount and one RCU grace period, not one per mount. A path below one detached
	// is then no mount point (EINVAL) or gone (ENOENT); the check below still refuses any
	// mount that stays.
	for i := len(mps) - 1; i >= 0; i-- {
		for unix.Unmount(mps[i], unix.MNT_DETACH) == nil {
		}
	}
	if err != nil {
		return
	}
	if left, err := host.MountsUnder(dir); err != nil || len(left) > 0 {
		return
	}
	_ = os.RemoveAll(dir)
}

// StartInSlot runs spec in slot: the claim's binds are attached under the claim root, the
// secrets written to the slot's pipes, the output copied to spec's sinks, and the held
// sandbox released. The slot is spent whatever happens: a failed claim kills it.
func (p *Provider) StartInSlot(ctx context.Context, slot *Slot, spec compute.Spec) (compute.Handle, error) {
	return p.StartInSlotWith(ctx, slot, spec, nil)
}

// StartInSlotWith is [Provider.StartInSlot] with beforeRelease, when not nil, called with the
// slot's task id once everything of the claim is in place and before the held sandbox is
// released: what the caller records there (the dispatch's start) is on record before
// anything of the claim runs. An error from it kills the slot, nothing having run, and is
// returned.
func (p *Provider) StartInSlotWith(ctx context.Context, slot *Slot, spec compute.Spec, beforeRelease func(taskID string) error) (compute.Handle, error) {
	slot.mu.Lock()
	was := slot.claimed
	slot.claimed = true
	slot.mu.Unlock()
	if was {
		return nil, fmt.Errorf("start %q: %w", spec.ID, ErrSlotClaimed)
	}
	h, err := slot.claim(ctx, spec, beforeRelease)
	if err != nil {
		if slot.h != nil && !slot.monitored {
			slot.h.abortHeld()
		}
		slot.cleanup()
		return nil, fmt.Errorf("start %q in warm slot: %w", spec.ID, err)
	}
	return h, nil
}

func (s *Slot) claim(ctx context.Context, spec compute.Spec, beforeRelease func(taskID string) error) (*handle, error) {
	if err := validateSpec(spec); err != nil {
		return nil, err
	}
	if compute.SlotShape(spec, s.opts) != s.shape {
		return nil, ErrSlotShape
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// A held sandbox can die while it waits (killed from outside, the OOM killer): claiming
	// it would hand the dispatch an exit it never had. It fails here, so the caller starts
	// cold (a claim of it would run nothing and report "killed").
	if heldExited(s.h.pid) {
		return nil, fmt.Errorf("the warm slot's sandbox ended before its claim%s", s.endedSaying())
	}
	if err := s.sameBinary(spec); err != nil {
		return nil, err
	}
	if err := s.fillClaimFiles(spec); err != nil {
		return nil, err
	}
	if s.stage != "" {
		// Staged ahead: the claim's tree is in the sandbox already; nothing is mounted.
		if err := s.checkStaged(spec); err != nil {
			return nil, err
		}
	} else if err := s.attach(spec); err != nil {
		return nil, err
	}
	// The caller may close its files once this returns, as it may after a cold start (whose
	// child then holds its own copies): the copies get descriptors of their own.
	for i, w := range s.secrets {
		fd, err := unix.FcntlInt(spec.Files[i].Fd(), unix.F_DUPFD_CLOEXEC, 3)
		if err != nil {
			return nil, fmt.Errorf("hand over files[%d]: %w", i, err)
		}
		go copySecrets(w, os.NewFile(uintptr(fd), "claim-file"))
		s.secrets[i] = nil
	}
	s.secrets = nil
	var drain sync.WaitGroup
	for i, sink := range []io.Writer{spec.Stdout, spec.Stderr} {
		r := s.outR[i]
		s.outR[i] = nil
		sink = cmp.Or(sink, io.Discard)
		drain.Go(func() {
			_, _ = io.Copy(sink, r)
			r.Close()
		})
	}
	h := s.h
	h.drain = drain.Wait
	h.gone = make(chan struct{})
	h.started = time.Now()
	s.p.mu.Lock()
	s.p.live[h.TaskID()] = h
	s.p.mu.Unlock()
	s.monitored = true
	go h.monitor(ctx, spec.Limits.Timeout, func() {
		s.p.mu.Lock()
		delete(s.p.live, h.TaskID())
		s.p.mu.Unlock()
		s.root.Close()
		s.done() // the directory goes now, or when the dispatch releases a taken stage
	})
	// A prestarted slot's command is already running: its claim pipe lets it go on.
	gate := s.blockW
	if s.goW != nil {
		gate = s.goW
	}
	if err := s.release(h, gate, beforeRelease); err != nil {
		return nil, err
	}
	return h, nil
}

// errSlotEnded: the held sandbox died after the claim's first look at it (the OOM killer, a
// kill from outside): nothing of the claim ran, and its exit is not the dispatch's.
var errSlotEnded = errors.New("the warm slot's sandbox ended before its claim was released")

// release runs beforeRelease, then opens the claimed slot's gate. The held sandbox is looked
// at again before each, since attaching the claim and committing the caller's record take
// time it may die in: a claim of a dead slot would hand the dispatch the kill
// as its agent's exit. A failure kills the slot before its gate closes (a held bwrap reads
// EOF on --block-fd as a release), so nothing of the claim runs.
func (s *Slot) release(h *handle, gate *os.File, beforeRelease func(taskID string) error) error {
	abandon := func(err error) error {
		h.requestCancel()
		<-h.done
		gate.Close()
		s.blockW, s.goW = nil, nil
		return err
	}
	if heldExited(h.pid) {
		return abandon(errSlotEnded)
	}
	if beforeRelease != nil {
		if err := beforeRelease(h.TaskID()); err != nil {
			return abandon(err)
		}
		if heldExited(h.pid) {
			return abandon(errSlotEnded)
		}
	}
	err := release(gate)
	gate.Close()
	s.blockW, s.goW = nil, nil
	if err != nil {
		h.requestCancel()
		<-h.done
		return err
	}
	return nil
}

// heldExited reports whether the held bwrap pid has exited (it stays unreaped, WNOWAIT).
func heldExited(pid int) bool {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		if err == unix.EINTR {
			continue
		}
		// An error (ECHILD: not ours to wait for) is treated as ended: fail closed.
		return err != nil || info.Signo != 0 // Linux writes si_signo 0 when nothing has exited
	}
}

// copySecrets copies the claim's secrets (a pipe the dispatch writes and closes) to the
// slot's fd-3 pipe and closes it: the worker reads to EOF, as from a cold sandbox's fd 3.
// Whole, as a cold sandbox takes them: the writer is the host's own dispatch, and a cut here
// would hand the worker a secrets file silently short.
func copySecrets(w *os.File, r *os.File) {
	defer w.Close()
	defer r.Close()
	_, _ = io.Copy(w, r)
}

// attach builds the claim's tree on a private staging tmpfs and binds it, recursively, onto
// the slot's shared mount point, whence it propagates into the held sandbox. The mount point
// is reached through the descriptor pinned at fill, never by path, so a directory swapped
// for a link in between changes nothing.
func (s *Slot) attach(spec compute.Spec) error {
	var binds []compute.Bind
	for _, b := range spec.Binds {
		if underRoot(b.Dst, s.opts.ClaimRoot) {
			binds = append(binds, b) // the others are part of the shape: bound at fill
		}
	}
	return s.attachTree(binds, nil)
}

// bindInto binds b.Src at stage/rel with the flags bwrap gives a bind: recursive, nosuid,
// nodev, read-only unless writable. The mount point is created as bwrap would: a
// directory for a directory, an empty file otherwise.
func bindInto(stage, rel string, b compute.Bind) error {
	fi, err := os.Stat(b.Src)
	if err != nil {
		return fmt.Errorf("bind %s: %w", b.Src, err)
	}
	dst := filepath.Join(stage, rel)
	if rel == "" {
		return fmt.Errorf("bind %s: cannot bind over the claim root itself", b.Src)
	}
	// bwrap resolves a mount point inside the sandbox's new root; this tree is built on the
	// host, where a symlink in an earlier bind's source (a cloned repository's) would lead the
	// mkdir and the mount out of the staging tree onto a host path.
	if err := noSymlinkBelow(stage, rel); err != nil {
		return fmt.Errorf("bind %s: %w", b.Src, err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("bind %s: %w", b.Src, err)
	}
	if fi.IsDir() {
		err = os.Mkdir(dst, 0o755)
	} else if st, lerr := os.Lstat(dst); lerr == nil && st.Mode().IsRegular() {
		// A file already there (under a read-only bind: the shared bundle's manifest) is the
		// mount point as it is, as bwrap takes it; opening it to create would fail.
		err = nil
	} else {
		var f *os.File
		if f, err = os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|unix.O_NOFOLLOW, 0o644); err == nil {
			err = f.Close()
		}
	}
	if err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("bind %s: %w", b.Src, err)
	}
	if err := noSymlinkBelow(stage, rel); err != nil {
		return fmt.Errorf("bind %s: %w", b.Src, err)
	}
	if err := unix.Mount(b.Src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s: %w", b.Src, err)
	}
	flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_NOSUID | unix.MS_NODEV)
	if !b.Writable {
		flags |= unix.MS_RDONLY
	}
	if err := unix.Mount("", dst, "", flags, ""); err != nil {
		return fmt.Errorf("bind %s: remount: %w", b.Src, err)
	}
	// A remount changes the top mount only; bwrap gives every mount below a bind the same
	// flags, so a source's own submounts must not stay writable, suid or dev here either
	// (else a read-only bind's submount is writable in a slot, where a cold sandbox has it
	// read-only).
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	if !b.Writable {
		attr.Attr_set |= unix.MOUNT_ATTR_RDONLY
	}
	if err := unix.MountSetattr(unix.AT_FDCWD, dst, unix.AT_RECURSIVE|unix.AT_SYMLINK_NOFOLLOW, &attr); err != nil {
		return fmt.Errorf("bind %s: flags of its submounts: %w", b.Src, err)
	}
	return nil
}

// removeSlotCgroup removes the task cgroup a dead holder's slot directory d names (nothing
// else finds a slot's cgroup, so each crash would leak one per slot). The name must
// be one cgroupName made for this slot, under the cgroup file system.
func removeSlotCgroup(d string) error {
	b, err := readCappedFile(filepath.Join(d, slotCgroup), 4096)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reap warm slot %s: %w", d, err)
	}
	cg := string(b)
	base, exact := cgroupBase(filepath.Base(d))
	if !exact || !filepath.IsAbs(cg) || filepath.Clean(cg) != cg || !strings.HasPrefix(cg, "/sys/fs/cgroup/") || !isCgroupOf(filepath.Base(cg), base) {
		return fmt.Errorf("reap warm slot %s: it names %q, not a cgroup of its own", d, cg)
	}
	return (&cgroup{dir: cg}).remove()
}

// readCappedFile reads path, not following a final symlink, refusing more than limit bytes.
func readCappedFile(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: over %d bytes", path, limit)
	}
	return b, nil
}

// noSymlinkBelow refuses a path rel below stage any existing component of which is a
// symlink. Nothing but the host writes there while a claim is attached (the slot's sandbox
// is held, the dispatch's not started), so the check holds until the mount.
func noSymlinkBelow(stage, rel string) error {
	p := stage
	for _, c := range strings.Split(rel, "/") {
		p = filepath.Join(p, c)
		fi, err := os.Lstat(p)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			return fmt.Errorf("its mount point passes through the symlink %s", strings.TrimPrefix(p, stage))
		}
	}
	return nil
}

// ReapSlots kills every slot a previous holder left under dir (its bwrap, named by the
// task id the slot wrote) and removes their directories. It runs when a pool starts: a
// slot of a crashed holder is never claimed. A slot whose holder lives (another resident
// process of the same home, this one) is left alone, ready or running a claim.
func ReapSlots(ctx context.Context, dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reap warm slots: %w", err)
	}
	var errs []error
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "slot-") {
			continue
		}
		d := filepath.Join(dir, e.Name())
		if holderLives(d) {
			continue
		}
		if b, err := os.ReadFile(filepath.Join(d, slotMeta)); err == nil {
			if tid, err := parseTaskID(string(b)); err == nil {
				if err := cancelForeign(ctx, tid); err != nil {
					errs = append(errs, err)
				}
			}
		}
		if err := removeSlotCgroup(d); err != nil {
			errs = append(errs, err)
		}
		removeSlotDir(d)
	}
	return errors.Join(errs...)
}

// holdNamespace opens the held sandbox's mount namespace and keeps it until the slot's
// teardown. Otherwise the last of the sandbox's processes to exit (its command, pid 1 with
// --as-pid-1) takes the namespace down on its way out, before its parent can learn of the
// exit: an unmount of every mount in it and an RCU grace period, 1-3 ms before the claim's
// dispatch could see its worker had ended. Held, the namespace goes when the slot
// closes it, in the background after the dispatch's end; nothing can enter it meanwhile
// (its processes are gone; setns needs the descriptor, which is root's and close-on-exec).
// Best effort: a namespace that cannot be held changes when its mounts go, nothing else.
func (s *Slot) holdNamespace() {
	pid := s.h.sandboxPID
	if pid <= 0 {
		return
	}
	f, err := os.OpenFile("/proc/"+strconv.Itoa(pid)+"/ns/mnt", os.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	// The pid still names bwrap's sandbox process: bwrap has no other child, and a held one
	// cannot exit unless killed (then the slot is dead, and its namespace of no matter).
	if st, err := readProcStat(pid); err != nil || st.ppid != s.h.pid {
		f.Close()
		return
	}
	s.ns = f
}
