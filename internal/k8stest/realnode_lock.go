package k8stest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// A real node is one per machine: its bridge, pod subnet and node IP are fixed, so a second
// node at the same time (go test runs packages in parallel, and several people share this
// machine) would take the first one's addresses and delete its bridge on the way out. Each
// real node holds an exclusive lock on realNodeLockFile for its life; the next one waits.
//
// The holder writes who it is into the lock file, so a waiter that gives up names it, and
// every acquire and release appends a line to realNodeJournal: how long each package waited
// for the node and held it is part of how long a unit step whose packages share it takes,
// and the journal is where that is read (docs/providers-k8s.md says where it is). They are
// variables so that the lock's own test points them elsewhere.
var (
	realNodeLockFile = "/run/agora-k8stest-realnode.lock"
	realNodeJournal  = "/run/agora-k8stest-realnode.log"
	// realNodeLockWait bounds the wait: a node's test takes well under this, so a longer
	// wait means a holder that is stuck, and the waiter fails saying so.
	realNodeLockWait = 15 * time.Minute
)

type realNodeHold struct {
	f        *os.File
	who      string // realNodeHolder's name for it, as the lock file and the journal say it
	acquired time.Time
}

var realNodeLocks sync.Map // *Cluster -> realNodeHold

func lockRealNode(c *Cluster) error {
	f, err := os.OpenFile(realNodeLockFile, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open the real node's lock: %w", err)
	}
	start := time.Now()
	deadline := start.Add(realNodeLockWait)
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
			holder, _ := os.ReadFile(realNodeLockFile)
			f.Close()
			return fmt.Errorf("another real node (%s) has held %s for %v: is a test stuck?",
				strings.TrimSpace(string(holder)), realNodeLockFile, realNodeLockWait)
		}
		time.Sleep(200 * time.Millisecond)
	}
	acquired := time.Now()
	who := realNodeHolder(c)
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(who+"\n"), 0)
	}
	journalRealNode(fmt.Sprintf("acquire %s waited=%.1fs", who, acquired.Sub(start).Seconds()))
	realNodeLocks.Store(c, realNodeHold{f: f, who: who, acquired: acquired})
	return nil
}

// unlockRealNode releases c's lock, if it holds one; closing the file drops the flock.
func unlockRealNode(c *Cluster) {
	if v, ok := realNodeLocks.LoadAndDelete(c); ok {
		h := v.(realNodeHold)
		journalRealNode(fmt.Sprintf("release %s held=%.1fs", h.who, time.Since(h.acquired).Seconds()))
		h.f.Close()
	}
}

// realNodeHolder names this process for the lock file and the journal: its pid, its program
// (a test binary is named for its package: dispatch.test) and the test that started c (a
// shared cluster's first).
func realNodeHolder(c *Cluster) string {
	return fmt.Sprintf("pid=%d prog=%s test=%s", os.Getpid(), filepath.Base(os.Args[0]), c.test)
}

// journalRealNode appends one line to realNodeJournal; the journal is a record for people, so
// failing to write it fails nothing.
func journalRealNode(line string) {
	f, err := os.OpenFile(realNodeJournal, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	_, _ = fmt.Fprintf(f, "%s %s\n", time.Now().UTC().Format(time.RFC3339Nano), line)
}
