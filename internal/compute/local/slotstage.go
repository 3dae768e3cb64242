package local

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/compute"
)

// A slot that stages ahead (compute.WarmOptions.Stage) makes at fill, besides its sandbox, the
// host directories its claim's binds come from, in a stage of its own (its directory's
// "stage", root's, 0700), with the disk quota mounted there first, and binds them into the
// sandbox with the worker's binary in the one tree the prestarted command starts from. Then
// the claim mounts nothing and the dispatch's end unmounts nothing: the dispatch writes its
// bundle, workspace and capability files into the directories its sandbox already shows, and
// the stage comes down with the slot's directory (one lazy unmount) in the background.
//
// The stage belongs to one dispatch: [Slot.TakeStage] hands it out once, a claim runs only
// with the stage taken and only when each of its binds under the claim root is exactly the
// staged directory of that place (its path, device and inode), and a stage is never made
// again or handed to another slot: a slot discarded, failed or of a killed holder takes its
// stage with it (ReapSlots, as for any slot). Until the claim the sandbox runs only the
// prestarted command, which waits on its claim pipe before it touches the claim root, so the
// host's writes there race nothing (the same contract as a prestarted slot's).

type stagedDir struct {
	path     string
	dev, ino uint64
}

// stageDirName is the stage's directory in the slot's directory.
const stageDirName = "stage"

// stageable says whether tmpl's claim binds are all served by o.Stage (the command's binary
// aside, which a prestarted slot binds at fill anyway).
func stageable(tmpl compute.Spec, o compute.WarmOptions) bool {
	if o.Stage == nil || o.PrestartEnv == "" || len(o.Stage.Dirs) == 0 {
		return false
	}
	if o.Stage.Quota != "" && (o.Stage.Mount == nil || !filepath.IsLocal(o.Stage.Quota)) {
		return false
	}
	cmd, err := commandBind(tmpl, o.ClaimRoot)
	if err != nil {
		return false
	}
	seen := map[string]bool{}
	for _, b := range tmpl.Binds {
		if !underRoot(b.Dst, o.ClaimRoot) || (cmd != nil && b.Dst == cmd.Dst) {
			continue
		}
		rel, ok := o.Stage.Dirs[b.Dst]
		if !ok || !filepath.IsLocal(rel) || seen[b.Dst] {
			return false
		}
		seen[b.Dst] = true
	}
	return len(seen) > 0
}

// makeStage makes the slot's stage: its directory, the quota mounted on it, then one empty
// directory (root's, 0700) for each of tmpl's claim places it serves. It returns the binds of
// those directories, with tmpl's flags, in tmpl's order.
func (s *Slot) makeStage(tmpl compute.Spec) ([]compute.Bind, error) {
	cmd, _ := commandBind(tmpl, s.opts.ClaimRoot)
	root := filepath.Join(s.dir, stageDirName)
	if err := os.Mkdir(root, 0o700); err != nil {
		return nil, fmt.Errorf("stage ahead: %w", err)
	}
	if q := s.opts.Stage.Quota; q != "" {
		if err := s.opts.Stage.Mount(filepath.Join(root, q)); err != nil {
			return nil, fmt.Errorf("stage ahead: %w", err)
		}
	}
	staged := map[string]stagedDir{}
	var binds []compute.Bind
	for _, b := range tmpl.Binds {
		if !underRoot(b.Dst, s.opts.ClaimRoot) || (cmd != nil && b.Dst == cmd.Dst) {
			continue
		}
		p := filepath.Join(root, s.opts.Stage.Dirs[b.Dst])
		if err := os.MkdirAll(p, 0o700); err != nil {
			return nil, fmt.Errorf("stage ahead: %w", err)
		}
		if u := tmpl.RunAs; u != nil {
			// The sandbox's user, as the dispatch hands its stage over (the command starts in
			// one of them): the slot's uid, which the claiming dispatch adopts.
			if err := os.Lchown(p, int(u.UID), int(u.GID)); err != nil {
				return nil, fmt.Errorf("stage ahead: %w", err)
			}
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return nil, fmt.Errorf("stage ahead: %w", err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return nil, fmt.Errorf("stage ahead: %s is not a directory", p)
		}
		staged[b.Dst] = stagedDir{path: p, dev: st.Dev, ino: st.Ino}
		binds = append(binds, compute.Bind{Src: p, Dst: b.Dst, Writable: b.Writable, Result: b.Result})
	}
	s.stage, s.staged = root, staged
	return binds, nil
}

// TakeStage hands the slot's stage to the dispatch about to claim the slot; ok is false when
// the slot has none, or it was taken, or the slot was claimed or discarded. Once taken, the
// stage (and the slot's directory it lives in) stays until release is called, whatever
// becomes of the slot: the dispatch may start cold on it. release removes them when the slot
// is done too; it may be called more than once.
func (s *Slot) TakeStage() (st compute.Staged, release func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stage == "" || s.taken || s.claimed {
		return compute.Staged{}, nil, false
	}
	s.taken = true
	s.refs++
	dirs := make(map[string]string, len(s.staged))
	for dst, d := range s.staged {
		dirs[dst] = d.path
	}
	var once sync.Once
	return compute.Staged{Root: s.stage, Dirs: dirs}, func() { once.Do(s.unref) }, true
}

// checkStaged refuses a claim of a staged slot unless the stage was taken and each of spec's
// binds under the claim root (but the command's) is its place's staged directory, the same
// file as at fill, and every staged place is bound.
func (s *Slot) checkStaged(spec compute.Spec) error {
	s.mu.Lock()
	taken := s.taken
	s.mu.Unlock()
	if !taken {
		return fmt.Errorf("%w: its stage was not taken for this claim", ErrSlotShape)
	}
	cmd, err := commandBind(spec, s.opts.ClaimRoot)
	if err != nil {
		return err
	}
	n := 0
	for _, b := range spec.Binds {
		if !underRoot(b.Dst, s.opts.ClaimRoot) || (cmd != nil && b.Dst == cmd.Dst) {
			continue
		}
		d, ok := s.staged[b.Dst]
		if !ok || b.Src != d.path {
			return fmt.Errorf("%w: %s is not bound from the slot's stage", ErrSlotShape, b.Dst)
		}
		var st unix.Stat_t
		if err := unix.Lstat(b.Src, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Dev != d.dev || st.Ino != d.ino {
			return fmt.Errorf("%w: the stage's %s is not the directory made at fill", ErrSlotShape, b.Dst)
		}
		n++
	}
	if n != len(s.staged) {
		return fmt.Errorf("%w: the claim binds %d of the stage's %d places", ErrSlotShape, n, len(s.staged))
	}
	return nil
}

// unref lets go of one of the slot directory's holders (the slot itself until it is done,
// and a taken stage until its dispatch releases it); the last one removes the directory,
// with every mount in it, then lets go of the namespace and the hold.
func (s *Slot) unref() {
	s.mu.Lock()
	s.refs--
	last := s.refs == 0
	s.mu.Unlock()
	if !last {
		return
	}
	removeSlotDir(s.dir)
	if s.ns != nil {
		s.ns.Close() // the sandbox's mounts go now, here (holdNamespace)
	}
	if s.hold != nil {
		s.hold.Close()
	}
}
