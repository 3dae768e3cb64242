package dispatch

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/host"
	"github.com/agora-dev/agora/internal/config"
)

// uidLeaseDir, beside the stage directories, holds one file per uid a dispatch of this home
// runs as, locked (flock) by its supervisor while the dispatch runs and naming the dispatch.
// The kernel drops the lock when the supervisor dies, however it dies, but a container or a
// pod outlives its supervisor (only bubblewrap dies with it): so a uid whose file names a
// dispatch whose stage is still in the held index (see heldDir) stays taken after the lock
// is gone, until Reap has had the provider remove the sandbox and released the stage. The files stay (at most one per uid of a range): removing one on
// release would let two dispatches lock two different files of one uid.
const uidLeaseDir = ".uids"

// maxUIDProbes bounds the search for a free uid: far more dispatches than this never run at
// once on one home, and a search that finds none fails closed.
const maxUIDProbes = 4096

// uidLease is a dispatch's hold on its host uid.
type uidLease struct {
	uid uint32
	f   *os.File
}

// release gives the uid back; the caller's sandbox has ended.
func (l *uidLease) release() {
	if l != nil && l.f != nil {
		l.f.Close()
	}
}

// errNoFreeUID is leaseUID's refusal when every uid it tried is held.
var errNoFreeUID = errors.New("no free sandbox uid")

// leaseUID picks the uid dispatch id runs as: its own of the target's range
// ([compute.SandboxUIDFor]), or, when a running dispatch of this home holds that one, the next
// free uid of the range. The hash alone lets two concurrent dispatches share a uid by chance,
// and they then share RLIMIT_NPROC and every other per-uid kernel counter: one could keep the
// other from forking. The lease rules that out among this home's
// dispatches, including those whose supervisor died while their sandbox may still run; homes
// or targets sharing a range are not coordinated, and nothing checks ranges for overlap yet.
func leaseUID(stateDir string, first config.UID, id string) (*uidLease, error) {
	dir := filepath.Join(stateDir, uidLeaseDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("lease a sandbox uid: %w", err)
	}
	lo, hi := compute.SandboxUIDRange(uint32(first))
	n := uint64(hi-lo) + 1
	start := uint64(compute.SandboxUIDFor(uint32(first), id) - lo)
	for i := uint64(0); i < min(n, maxUIDProbes); i++ {
		uid := lo + uint32((start+i)%n)
		f, err := os.OpenFile(filepath.Join(dir, strconv.FormatUint(uint64(uid), 10)), os.O_CREATE|os.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return nil, fmt.Errorf("lease a sandbox uid: %w", err)
		}
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			ok, err := claimUID(stateDir, f, id)
			if ok {
				return &uidLease{uid: uid, f: f}, nil
			}
			f.Close()
			if err != nil {
				return nil, fmt.Errorf("lease sandbox uid %d: %w", uid, err)
			}
			continue // an orphaned sandbox may still run as uid
		}
		f.Close()
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("lease sandbox uid %d: %w", uid, err)
		}
	}
	return nil, fmt.Errorf("%w: dispatches running or not yet reaped hold the first %d tried of the range from %d", errNoFreeUID, min(n, maxUIDProbes), lo)
}

// claimUID, with f's lock held, reports whether the uid of lease file f is free, and if so
// writes id into it. It is not free while the dispatch f names (another than id) still has
// its stage held: its supervisor died before releasing it, so its sandbox may still run. Nor
// while a process runs as the uid of a warm slot f names: no stage holds a slot's lease, and a
// holder killed while the slot's bwrap set it up leaves, before anything names the slot's
// task, bwrap's sandbox process waiting for ever on the dead launcher.
func claimUID(stateDir string, f *os.File, id string) (bool, error) {
	var buf [64]byte
	k, err := f.ReadAt(buf[:], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	if prev := string(buf[:k]); prev != "" && prev != id {
		_, err := os.Lstat(filepath.Join(stateDir, heldDir, filepath.Base(prev)))
		if err == nil {
			return false, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return false, err
		}
		// Only then: reading every process's status costs milliseconds per lease.
		if strings.HasPrefix(prev, warmLeasePrefix) {
			uid := filepath.Base(f.Name())
			pids, err := host.UIDProcesses(uid)
			if err == nil && host.EndOrphanedSandboxes(uid, pids) {
				pids, err = host.UIDProcesses(uid)
			}
			if err != nil || len(pids) > 0 {
				return false, err
			}
		}
	}
	if err := f.Truncate(0); err != nil {
		return false, err
	}
	if _, err := f.WriteAt([]byte(id), 0); err != nil {
		return false, err
	}
	return true, nil
}

// transfer names dispatch id in the lease file: a warm slot's uid, leased when the slot was
// started, becomes the dispatch's that claims it (the lock is held throughout).
func (l *uidLease) transfer(id string) error {
	if l == nil {
		return nil
	}
	if err := l.f.Truncate(0); err != nil {
		return fmt.Errorf("move sandbox uid %d to %s: %w", l.uid, id, err)
	}
	if _, err := l.f.WriteAt([]byte(id), 0); err != nil {
		return fmt.Errorf("move sandbox uid %d to %s: %w", l.uid, id, err)
	}
	return nil
}

// leasedUIDIdle ends every orphaned sandbox running as the uid dispatch id leased (its lease
// file names it; host.EndOrphanedSandboxes), then returns an error naming the processes of this
// host that still run as it, and nil when none do or it leased none. Only a dispatch whose
// supervisor is gone is asked (release): none of its sandbox's processes may run then, so
// the uid must not go back while one does. A zombie runs nothing and is not
// counted. A process of another home sharing the uid range holds the uid the same way, which
// is no harm: the uid is not this home's to give while it runs.
func leasedUIDIdle(stateDir, id string) error {
	dir := filepath.Join(stateDir, uidLeaseDir)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("find the uid of dispatch %s: %w", id, err)
	}
	uid := ""
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err == nil && string(b) == id {
			uid = e.Name()
			break
		}
	}
	if uid == "" {
		return nil
	}
	pids, err := host.UIDProcesses(uid)
	if err != nil {
		return err
	}
	if host.EndOrphanedSandboxes(uid, pids) {
		if pids, err = host.UIDProcesses(uid); err != nil {
			return err
		}
	}
	if len(pids) > 0 {
		return fmt.Errorf("uid %s (dispatch %s) still runs as pids %s", uid, id, strings.Join(pids, " "))
	}
	return nil
}

// warmLeasePrefix begins the name a warm slot leases its uid under until a dispatch claims it.
const warmLeasePrefix = "warm-"
