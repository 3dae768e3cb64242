package slots

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/compute/remote"
)

// A claimed docker slot has no gateway slot any more (the gateway removes it at the claim),
// yet its container runs the claiming dispatch. Another holder of the same home (a second
// resident process) sweeps slot containers whose slot does not stand at its StartWarm, and
// would take such a container for a killed holder's: it would remove it and the running
// dispatch would end lost. So the dispatch holds a claim mark, AGORA_HOME/gateway/claimed/SLOT,
// flocked from before its Bind until its container has ended: a sweep leaves a slot whose mark
// is held, and the kernel drops the lock of a holder killed with -9, whose slots are then swept
// like any dead holder's.

// claimedDir is where the claim marks are.
func (g *gateway) claimedDir() string {
	return filepath.Join(filepath.Dir(g.slots.Dir), "claimed")
}

// holdClaim marks slot id claimed by this process; release lets go (idempotent).
func (g *gateway) holdClaim(id string) (release func(), err error) {
	if !remote.ValidSlotID(id) {
		return nil, fmt.Errorf("claim mark: slot id %q is not valid", id)
	}
	dir := g.claimedDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("claim mark: %w", err)
	}
	path := filepath.Join(dir, id)
	for range 3 {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return nil, fmt.Errorf("claim mark: %w", err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			return nil, fmt.Errorf("claim mark of slot %s: held already: %w", id, err)
		}
		// A sweep may have removed a free mark between the open and the lock: hold the file
		// that is at the path.
		var held, at unix.Stat_t
		if unix.Fstat(int(f.Fd()), &held) != nil || unix.Lstat(path, &at) != nil || held.Ino != at.Ino || held.Dev != at.Dev {
			f.Close()
			continue
		}
		var once sync.Once
		return func() {
			once.Do(func() {
				os.Remove(path)
				f.Close()
			})
		}, nil
	}
	return nil, errors.New("claim mark: the mark kept being removed")
}

// claimHeld says whether slot id's claim mark is held by a living process.
func (g *gateway) claimHeld(id string) bool {
	if !remote.ValidSlotID(id) {
		return false
	}
	f, err := os.OpenFile(filepath.Join(g.claimedDir(), id), os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	return syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB) != nil
}

// sweepClaimMarks removes the marks no living process holds (a killed holder's).
func (g *gateway) sweepClaimMarks() {
	ents, _ := os.ReadDir(g.claimedDir())
	for _, e := range ents {
		if remote.ValidSlotID(e.Name()) && !g.claimHeld(e.Name()) {
			os.Remove(filepath.Join(g.claimedDir(), e.Name()))
		}
	}
}

// Each holder serves its slots' gateway on a socket of its own, AGORA_HOME/gateway/
// slots-RANDOM.sock: with one shared path, a second holder of the home would take the path
// over (its listen removes the first's socket file) and remove it when it stops, so the first
// holder's slot containers started from then on would find no gateway.

// slotSocketPath is a new holder's socket path below the gateway directory dir.
func slotSocketPath(dir string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return filepath.Join(dir, "slots-"+hex.EncodeToString(b[:])+".sock")
}

// listenSlotSocket listens on the Unix socket path through an O_PATH descriptor of its
// directory, so a home whose path is near the socket address's 107 bytes still works; the
// listener removes the socket file when closed.
func listenSlotSocket(path string) (net.Listener, error) {
	fd, err := unix.Open(filepath.Dir(path), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: fmt.Sprintf("/proc/self/fd/%d/%s", fd, filepath.Base(path)), Net: "unix"})
	if err != nil {
		return nil, err
	}
	ln.SetUnlinkOnClose(false)
	return removeOnClose{ln, path}, nil
}

type removeOnClose struct {
	*net.UnixListener
	path string
}

func (l removeOnClose) Close() error {
	err := l.UnixListener.Close()
	os.Remove(l.path)
	return err
}

// sweepSlotSockets removes the slot sockets below dir that nothing listens on (a killed
// holder's), and a shared slots.sock that an older agora served all holders on.
func sweepSlotSockets(ctx context.Context, dir string) {
	socks, _ := filepath.Glob(filepath.Join(dir, "slots*.sock"))
	for _, sock := range socks {
		fi, err := os.Lstat(sock)
		if err != nil || fi.Mode().Type() != os.ModeSocket {
			continue
		}
		dctx, cancel := context.WithTimeout(ctx, time.Second)
		c, err := (&net.Dialer{}).DialContext(dctx, "unix", sock)
		cancel()
		if err == nil {
			c.Close()
			continue
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			os.Remove(sock)
		}
	}
}
