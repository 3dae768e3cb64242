package netgw

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"
)

// A session is revoked when its session.json goes or names another token (a re-export); its
// open tunnels must then close at both ends. One watcher per dispatch and token looks, for all
// of that session's tunnels, every revokeCheck: it stats the session's directory and
// session.json and reads the file again only when either changed (inode, size or times:
// Export makes a new directory, and saveRecord replaces the file by rename), and every
// revokeReread in any case. Idle tunnels thus cost a stat a second per session, where each
// tunnel used to read and parse session.json every second. A session
// that cannot be read back ends its tunnels too: fail closed.

// sessionWatch is the watcher of one session (a dispatch id and its token's hash).
type sessionWatch struct {
	revoked chan struct{} // closed once the session is revoked
	stop    chan struct{} // closed when no tunnel needs the watcher any more
	refs    int           // guarded by tunnelSet.mu: tunnels watching
}

type watchKey struct{ id, sum string }

// watchSession returns a channel closed when session (id, sum) is revoked, and the func a
// tunnel calls when it no longer needs it.
func (t *tunnelSet) watchSession(dir, id, sum string) (<-chan struct{}, func()) {
	k := watchKey{id, sum}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.watches == nil {
		t.watches = map[watchKey]*sessionWatch{}
	}
	w := t.watches[k]
	if w == nil {
		w = &sessionWatch{revoked: make(chan struct{}), stop: make(chan struct{})}
		t.watches[k] = w
		go w.run(dir, id, sum)
	}
	w.refs++
	return w.revoked, func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if w.refs--; w.refs == 0 {
			close(w.stop)
			delete(t.watches, k)
		}
	}
}

// testOnlyLooked, when set (by a test), is called after each look of a session's watcher: a
// test waits for looks rather than for a stretch of time.
var testOnlyLooked atomic.Pointer[func()]

// revokeReread is how often a watcher reads session.json even when its stamp did not change:
// a file replaced within one tick of the kernel's coarse clock, on a reused inode, at the same
// size, could keep its stamp.
const revokeReread = 30 * time.Second

// run closes w.revoked once session (id, sum) stands no more, or returns when w.stop closes.
func (w *sessionWatch) run(dir, id, sum string) {
	var (
		seen     stamp
		lastRead time.Time
	)
	tick := time.NewTicker(revokeCheck)
	defer tick.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-tick.C:
		}
		stands := w.look(dir, id, sum, &seen, &lastRead)
		if f := testOnlyLooked.Load(); f != nil {
			(*f)()
		}
		if !stands {
			close(w.revoked)
			return
		}
	}
}

// look reports whether session (id, sum) still stands, reading session.json only when its
// stamp changed since seen or revokeReread passed since lastRead.
func (w *sessionWatch) look(dir, id, sum string, seen *stamp, lastRead *time.Time) bool {
	sd, err := sessionDir(dir, id)
	if err != nil {
		return false
	}
	st, err := stampOf(sd)
	if err == nil && st == *seen && time.Since(*lastRead) < revokeReread {
		return true
	}
	rec, rerr := loadRecord(dir, id)
	if err != nil || rerr != nil || rec.TokenSHA256 != sum {
		return false
	}
	*seen, *lastRead = st, time.Now()
	return true
}

// stamp is what tells a session replaced or rewritten from the one read before: its
// directory's and its session.json's identity and times (Export makes both afresh).
type stamp struct{ dir, file fileStamp }

func stampOf(sd string) (stamp, error) {
	d, err := fileStampOf(sd)
	if err != nil {
		return stamp{}, err
	}
	f, err := fileStampOf(filepath.Join(sd, sessionFile))
	return stamp{d, f}, err
}

// fileStamp is what tells a replaced or rewritten file from the one read before.
type fileStamp struct {
	dev, ino uint64
	size     int64
	mtime    int64 // ns
	ctime    int64 // ns
}

func fileStampOf(path string) (fileStamp, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return fileStamp{}, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileStamp{}, os.ErrInvalid
	}
	return fileStamp{dev: uint64(st.Dev), ino: st.Ino, size: st.Size,
		mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano()}, nil
}
