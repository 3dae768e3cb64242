package service

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// LockFile is the name of serve's lock in the orch directory.
const LockFile = "serve.lock"

// staleLockWait bounds how long Lock waits for a lock whose recorded owner is dead.
const staleLockWait = 10 * time.Second

// ErrRunning means another serve holds the lock.
var ErrRunning = errors.New("the orchestrator is already running")

// Lock takes the exclusive lock that makes this process the only owner of orch.db, and
// writes its pid into the lock file so a refused second serve can name the holder. The lock
// is released by the kernel when the process dies, however it dies.
func Lock(dir string) (release func(), err error) {
	path := filepath.Join(dir, LockFile)
	release, holder, err := LockPath(path)
	if errors.Is(err, ErrHeld) {
		return nil, fmt.Errorf("%w (pid %s holds %s); stop it first or use it: every 'agora orch' command talks to it", ErrRunning, holder, path)
	}
	return release, err
}

// ErrHeld means another live process holds a [LockPath] lock.
var ErrHeld = errors.New("held by another process")

// LockPath takes the exclusive lock at path for this process's life, writing its pid there;
// when another live process holds it, the error wraps ErrHeld and holder is that pid as the
// file says ("unknown" when it says none).
func LockPath(path string) (release func(), holder string, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, "", fmt.Errorf("lock %s: %w", path, err)
	}
	deadline := time.Now().Add(staleLockWait)
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, "", fmt.Errorf("lock %s: %w", path, err)
		}
		b, _ := os.ReadFile(path)
		pid, perr := strconv.Atoi(strings.TrimSpace(string(b)))
		if perr == nil && pid > 0 && unix.Kill(pid, 0) == nil || time.Now().After(deadline) {
			f.Close()
			holder := "unknown"
			if perr == nil {
				holder = strconv.Itoa(pid)
			}
			return nil, holder, ErrHeld
		}
		// The serve that wrote the file is gone, yet the lock is held: a child it was
		// starting when it died still has the descriptor until it execs. Wait for that.
		time.Sleep(50 * time.Millisecond)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
		f.Sync()
	}
	return func() { f.Close() }, "", nil
}
