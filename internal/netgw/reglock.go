package netgw

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// A dispatch's session is made, replaced, taken back and ended by several processes: the
// supervisors that start it (two Starts of one dispatch can race: compute/kubernetes's claims),
// the reaper, a restarted supervisor. Each of these holds the dispatch's lock, an flock on
// Dir/.locks/<id> that the kernel drops with a process that dies holding it, while it looks at
// the session and changes it. So a session is ended only by its own exporter (Close, which
// checks the token is still its own), the reaper (Revoke), or an export whose caller says it
// holds the dispatch (ExportIf): a Start that froze past its claim no longer replaces, or
// closes by path, the session of the Start that took the claim over.
// The lock is the dispatch's alone: a frozen holder (a stopped process) delays no other
// dispatch.

// lockDir holds the dispatches' lock files, beside their session directories (a dispatch id
// never starts with a dot).
const lockDir = ".locks"

// lockPoll is how often a waiting caller tries a held lock again.
const lockPoll = 10 * time.Millisecond

// lockDispatch takes dispatch id's lock, waiting while ctx lasts. The returned func releases
// it; with drop set it also removes the lock file (the session is gone), which the next
// locker notices and makes afresh.
func (g *Registry) lockDispatch(ctx context.Context, id string) (func(drop bool), error) {
	if _, err := sessionDir(g.Dir, id); err != nil {
		return nil, err
	}
	unlock, err := lockName(ctx, g.Dir, id)
	if err != nil {
		return nil, fmt.Errorf("lock gateway session %q: %w", id, err)
	}
	return unlock, nil
}

// lockName takes the lock of name (checked by the caller) in base/.locks, waiting while ctx
// lasts: the dispatches' locks and the warm slots' (slot.go).
func lockName(ctx context.Context, base, name string) (func(drop bool), error) {
	dir := filepath.Join(base, lockDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, name)
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|noFollow|syscall.O_CLOEXEC, 0o600)
		if err != nil {
			return nil, err
		}
		if err := flockWait(ctx, f); err != nil {
			f.Close()
			return nil, err
		}
		// The holder before may have removed the file: a lock on a removed file locks
		// nothing, so lock the file that is there now.
		var held, now syscall.Stat_t
		if syscall.Fstat(int(f.Fd()), &held) == nil && syscall.Lstat(path, &now) == nil &&
			held.Dev == now.Dev && held.Ino == now.Ino {
			return func(drop bool) {
				if drop {
					os.Remove(path)
				}
				f.Close()
			}, nil
		}
		f.Close()
	}
}

// flockWait takes an exclusive flock on f, trying again every lockPoll until ctx ends.
func flockWait(ctx context.Context, f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			return err
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(lockPoll):
		}
	}
}
