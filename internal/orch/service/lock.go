package service

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// LockFile is the name of serve's lock in the orch directory.
const LockFile = "serve.lock"

// ErrRunning means another serve holds the lock.
var ErrRunning = errors.New("the orchestrator is already running")

// Lock takes the exclusive lock that makes this process the only owner of orch.db, and
// writes its pid into the lock file so a refused second serve can name the holder. The lock
// is released by the kernel when the process dies, however it dies.
func Lock(dir string) (release func(), err error) {
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		b, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			pid := strings.TrimSpace(string(b))
			if _, perr := strconv.Atoi(pid); perr != nil {
				pid = "unknown"
			}
			return nil, fmt.Errorf("%w (pid %s holds %s); stop it first or use it: every 'agora orch' command talks to it", ErrRunning, pid, path)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
		f.Sync()
	}
	return func() { f.Close() }, nil
}
