package k8stest

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"
)

// A real node is one per machine: its bridge, pod subnet and node IP are fixed, so a second
// node at the same time (go test runs packages in parallel, and several people share this
// machine) would take the first one's addresses and delete its bridge on the way out. Each
// real node holds an exclusive lock on realNodeLockFile for its life; the next one waits.
const (
	realNodeLockFile = "/run/agora-k8stest-realnode.lock"
	// realNodeLockWait bounds the wait: a node's test takes well under this, so a longer
	// wait means a holder that is stuck, and the waiter fails saying so.
	realNodeLockWait = 15 * time.Minute
)

var realNodeLocks sync.Map // *Cluster -> *os.File

func lockRealNode(c *Cluster) error {
	f, err := os.OpenFile(realNodeLockFile, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open the real node's lock: %w", err)
	}
	deadline := time.Now().Add(realNodeLockWait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return fmt.Errorf("lock %s: %w", realNodeLockFile, err)
		}
		if time.Now().After(deadline) {
			f.Close()
			return fmt.Errorf("another real node has held %s for %v: is a test stuck?", realNodeLockFile, realNodeLockWait)
		}
		time.Sleep(200 * time.Millisecond)
	}
	realNodeLocks.Store(c, f)
	return nil
}

// unlockRealNode releases c's lock, if it holds one; closing the file drops the flock.
func unlockRealNode(c *Cluster) {
	if f, ok := realNodeLocks.LoadAndDelete(c); ok {
		f.(*os.File).Close()
	}
}
