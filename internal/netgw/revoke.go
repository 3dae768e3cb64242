package netgw

import (
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// A session is revoked when its session.json goes or names another token (a re-export); its
// open tunnels must then close at both ends. One watcher per dispatch and token looks, for all
// of that session's tunnels, every revokeCheck: it stats session.json and reads it again only
// when the file changed (its inode, size or modification time; saveRecord replaces it by
// rename, so a new session is a new inode). Idle tunnels therefore cost no reads, where each
// used to read and parse session.json every second (red team s3, finding G). A session that
// cannot be read back ends its tunnels too: fail closed.

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

// run closes w.revoked once session (id, sum) stands no more, or returns when w.stop closes.
func (w *sessionWatch) run(dir, id, sum string) {
	var seen fileStamp
	tick := time.NewTicker(revokeCheck)
	defer tick.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-tick.C:
		}
		sd, err := sessionDir(dir, id)
		if err != nil {
			close(w.revoked)
			return
		}
		st, err := stampOf(filepath.Join(sd, sessionFile))
		if err == nil && st == seen {
			continue
		}
		rec, rerr := loadRecord(dir, id)
		if err != nil || rerr != nil || rec.TokenSHA256 != sum {
			close(w.revoked)
			return
		}
		seen = st
	}
}

// fileStamp is what tells a replaced or rewritten file from the one read before.
type fileStamp struct {
	dev, ino uint64
	size     int64
	mtime    int64 // ns
	ctime    int64 // ns
}

func stampOf(path string) (fileStamp, error) {
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
