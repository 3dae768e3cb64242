package netgw

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/remote"
	"github.com/agora-dev/agora/internal/worker/wire"
)

const noFollow = syscall.O_NOFOLLOW

// Limits of a session's host side.
const (
	// MaxFileSize caps what one spec.Files entry serves (the secrets object is 1 MiB at most).
	MaxFileSize = 16 << 20
	// DrainTimeout bounds how long Close waits for the worker's streams to reach the spec's
	// writers once the token is revoked.
	DrainTimeout = 10 * time.Second
)

// Registry holds the gateway's sessions in Dir (AGORA_HOME/gateway/sessions), one directory
// per dispatch: session.json and the Unix sockets through which the process that exported the
// session (a supervisor) serves its files and receives its streams. The [Server] may run in
// another process (agora gateway serve, agora orch serve) on the same host: all it shares
// with the exporter is this directory. Registry implements [remote.Exporter].
type Registry struct {
	// Dir is the sessions directory; it is made 0700 when missing.
	Dir string
	// Sessions, when set, also keeps each session in a database that outlives this host's
	// disk (agora.db, replicated), and decides whether a session stands (stored.go). nil: the
	// files in Dir alone decide.
	Sessions SessionStore
	// Uploads, when set (with Sessions), keeps each result mount's upload beyond this host's
	// disk before the gateway answers it, and gives a session taken over its kept upload
	// (kept.go). nil: an upload is on this disk only.
	Uploads UploadStore
}

var _ remote.Exporter = (*Registry)(nil)

// Export registers spec's session: a fresh token (only its SHA-256 is stored), a mount per
// bind, spec.Files served once each, spec.Stdout and spec.Stderr fed from the worker's
// streams. A session already registered for the dispatch (a restarted supervisor) is
// replaced, and its token stops working.
//
// The bind at [wire.BinPath] (the host's agora binary) becomes no mount: the pod runs the
// agora binary of its own worker image, whose version the fetch step checks.
func (g *Registry) Export(ctx context.Context, spec compute.Spec) (*remote.Session, error) {
	return g.ExportIf(ctx, spec, nil)
}

var _ remote.ClaimExporter = (*Registry)(nil)

// ExportIf is Export, except that a session of the dispatch that stands already is replaced
// only when held (nil: always), called under the dispatch's lock, returns nil; its error is
// returned as it is, and nothing is touched.
func (g *Registry) ExportIf(ctx context.Context, spec compute.Spec, held func(context.Context) error) (*remote.Session, error) {
	sd, err := sessionDir(g.Dir, spec.ID)
	if err != nil {
		return nil, err
	}
	mounts, err := exportMounts(spec.Binds)
	if err != nil {
		return nil, fmt.Errorf("export dispatch %q: %w", spec.ID, err)
	}
	if err := os.MkdirAll(g.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("export dispatch %q: %w", spec.ID, err)
	}
	unlock, err := g.lockDispatch(ctx, spec.ID)
	if err != nil {
		return nil, fmt.Errorf("export dispatch %q: %w", spec.ID, err)
	}
	defer func() {
		// A failed export leaves no session: its lock file goes too.
		_, err := os.Lstat(filepath.Join(sd, sessionFile))
		unlock(errors.Is(err, fs.ErrNotExist))
	}()
	if _, err := os.Lstat(filepath.Join(sd, sessionFile)); held != nil && !errors.Is(err, fs.ErrNotExist) {
		if err := held(ctx); err != nil {
			return nil, err
		}
	}
	// Revoke and clear a previous session of the dispatch before anything of this one exists:
	// its stored row first, which decides whether its token is accepted (stored.go).
	if err := g.deleteStored(ctx, spec.ID, ""); err != nil {
		return nil, fmt.Errorf("export dispatch %q: %w", spec.ID, err)
	}
	if err := os.RemoveAll(sd); err != nil {
		return nil, fmt.Errorf("export dispatch %q: %w", spec.ID, err)
	}
	if err := os.Mkdir(sd, 0o700); err != nil {
		return nil, fmt.Errorf("export dispatch %q: %w", spec.ID, err)
	}
	x := &exported{reg: g, id: spec.ID, dir: sd}
	ok := false
	defer func() {
		if !ok {
			x.stop()
			os.RemoveAll(sd)
		}
	}()
	if err := x.serveStreams(spec.Stdout, spec.Stderr); err != nil {
		return nil, fmt.Errorf("export dispatch %q: %w", spec.ID, err)
	}
	if err := x.serveFiles(spec.Files); err != nil {
		return nil, fmt.Errorf("export dispatch %q: %w", spec.ID, err)
	}
	token, sum, err := newToken()
	if err != nil {
		return nil, err
	}
	rec := &record{Version: 1, Dispatch: spec.ID, TokenSHA256: sum, Mounts: mounts, Files: len(spec.Files), MaxUploadBytes: max(spec.Limits.Disk, 0),
		Stored: g.Sessions != nil}
	// The stored row, then session.json last: the token works only once everything it
	// reaches is served, and the row is in agora.db (replicated) before any pod can hold the
	// token.
	if err := g.putStored(ctx, rec); err != nil {
		return nil, fmt.Errorf("export dispatch %q: %w", spec.ID, err)
	}
	if err := saveRecord(sd, rec); err != nil {
		return nil, errors.Join(err, g.deleteStored(context.WithoutCancel(ctx), spec.ID, sum))
	}
	x.sum = sum
	ok = true
	s := &remote.Session{Dispatch: spec.ID, Token: token, Files: len(spec.Files), Close: x.close}
	for _, m := range mounts {
		s.Mounts = append(s.Mounts, m.Mount)
	}
	return s, nil
}

var _ remote.Reattacher = (*Registry)(nil)

// Reattach takes back the session of spec.ID, exported by a process that is gone: the token
// stays valid, the streams feed spec's writers from now on. On the host that exported it,
// files are not served again (the worker read them at its start); a session taken over from
// another replica serves spec's (restore). [ErrNoSession] when the dispatch has no session.
//
// With a store, the stored row decides (stored.go): a local session without it was revoked
// ([ErrNoSession]); a row with no local session is one another replica exported before this
// one took over, taken back here (see restore).
func (g *Registry) Reattach(ctx context.Context, spec compute.Spec) (*remote.Session, error) {
	unlock, err := g.lockDispatch(ctx, spec.ID)
	if err != nil {
		return nil, fmt.Errorf("reattach dispatch %q: %w", spec.ID, err)
	}
	defer unlock(false)
	rec, err := g.standing(ctx, spec.ID)
	restored := errors.Is(err, errNotHere)
	if restored {
		rec, err = g.restore(ctx, spec, rec)
	}
	if err != nil {
		return nil, err
	}
	sd, _ := sessionDir(g.Dir, spec.ID)
	x := &exported{reg: g, id: spec.ID, dir: sd, sum: rec.TokenSHA256}
	failed := func(err error) (*remote.Session, error) {
		x.stop()
		if restored {
			os.RemoveAll(sd) // no half session: the next Reattach takes it back again
		}
		return nil, fmt.Errorf("reattach dispatch %q: %w", spec.ID, err)
	}
	if err := x.serveStreams(spec.Stdout, spec.Stderr); err != nil {
		return failed(err)
	}
	if restored {
		// Taken over: the worker may not have read them on the replica that is gone. Then
		// session.json, last, as Export writes it: the token is served only once all it
		// reaches is.
		if rec.Files > 0 {
			if err := x.serveFiles(spec.Files); err != nil {
				return failed(err)
			}
		}
		if err := saveRecord(sd, rec); err != nil {
			return failed(err)
		}
	}
	s := &remote.Session{Dispatch: spec.ID, Files: rec.Files, Close: x.close}
	for _, m := range rec.Mounts {
		s.Mounts = append(s.Mounts, m.Mount)
	}
	return s, nil
}

var _ remote.Revoker = (*Registry)(nil)

// Revoke ends dispatch id's session, whoever exported it: session.json goes first (every
// route then answers 401, and its tunnels close within a second), then the directory. The
// reaper calls it for a dispatch whose supervisor died, since that session's Close will never
// run. No session is no error.
func (g *Registry) Revoke(ctx context.Context, id string) error {
	sd, err := sessionDir(g.Dir, id)
	if err != nil {
		return err
	}
	unlock, err := g.lockDispatch(ctx, id)
	if err != nil {
		return fmt.Errorf("revoke gateway session %q: %w", id, err)
	}
	defer unlock(true)
	// The stored row first (it decides, stored.go); the local files go even if it cannot:
	// a session is better ended here than left.
	serr := g.deleteStored(ctx, id, "")
	if err := os.Remove(filepath.Join(sd, sessionFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("revoke gateway session %q: %w", id, err)
	}
	if serr != nil {
		os.RemoveAll(sd)
		return fmt.Errorf("revoke gateway session %q: %w", id, serr)
	}
	if err := os.RemoveAll(sd); err != nil {
		return fmt.Errorf("remove gateway session %q: %w", id, err)
	}
	return nil
}

// exportMounts maps binds to mounts.
func exportMounts(binds []compute.Bind) ([]mountRecord, error) {
	taken := map[string]bool{}
	var out []mountRecord
	for _, b := range binds {
		if b.Dst == wire.BinPath {
			continue
		}
		if !filepath.IsAbs(b.Src) || !filepath.IsAbs(b.Dst) {
			return nil, fmt.Errorf("bind %q -> %q: paths must be absolute", b.Src, b.Dst)
		}
		fi, err := os.Stat(b.Src)
		if err != nil {
			return nil, fmt.Errorf("bind %q: %w", b.Dst, err)
		}
		m := mountRecord{Mount: remote.Mount{Name: mountName(b.Dst, taken), Dst: b.Dst, Writable: b.Writable, Result: b.Result}, Src: b.Src}
		switch {
		case fi.Mode().IsRegular():
			if b.Result {
				return nil, fmt.Errorf("bind %q: a result bind must be a directory", b.Dst)
			}
			m.File, m.Fetch = true, true
		case fi.IsDir():
			socks, err := sockets(b.Src)
			if err != nil {
				return nil, fmt.Errorf("bind %q: %w", b.Dst, err)
			}
			m.Sockets = socks
			// The worker creates its end of each socket in the volume, so a socket
			// directory is writable in the pod; it has nothing else to fetch.
			if len(socks) > 0 {
				m.Writable = true
			}
			m.Fetch = !b.Result && len(socks) == 0
		default:
			return nil, fmt.Errorf("bind %q: %s is neither a file nor a directory", b.Dst, fi.Mode().Type())
		}
		out = append(out, m)
	}
	return out, nil
}

// sockets lists the Unix sockets directly in dir.
func sockets(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if e.Type() == fs.ModeSocket && validSocketName(e.Name()) {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// exported is the exporting process's side of a session: the listeners of its files and
// streams.
type exported struct {
	reg *Registry
	id  string
	dir string
	sum string // the token's SHA-256: what tells this session from one that replaced it

	mu     sync.Mutex
	lns    []net.Listener        // guarded by mu
	files  []*os.File            // guarded by mu: duplicates of spec.Files, closed once served
	active map[net.Conn]struct{} // guarded by mu: stream connections being copied

	conns  sync.WaitGroup // stream copies; Go is called only by accept loops
	accept sync.WaitGroup // accept loops
	once   sync.Once
	err    error
}

// serveStreams listens for the server's relay of each stream and copies it into w.
func (x *exported) serveStreams(stdout, stderr io.Writer) error {
	for _, s := range []struct {
		name string
		w    io.Writer
	}{{stdoutSocket, stdout}, {stderrSocket, stderr}} {
		ln, err := listenUnix(filepath.Join(x.dir, s.name))
		if err != nil {
			return err
		}
		x.mu.Lock()
		x.lns = append(x.lns, ln)
		x.mu.Unlock()
		w := &lockedWriter{w: s.w}
		x.accept.Go(func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				x.mu.Lock()
				if x.active == nil {
					x.active = map[net.Conn]struct{}{}
				}
				x.active[c] = struct{}{}
				x.mu.Unlock()
				x.conns.Go(func() {
					io.Copy(w, c)
					c.Close()
					x.mu.Lock()
					delete(x.active, c)
					x.mu.Unlock()
				})
			}
		})
	}
	return nil
}

// serveFiles serves each file once on its socket. The files are duplicated: the caller may
// close its own once Export returns (the supervisor closes its pipe end after Start).
func (x *exported) serveFiles(files []*os.File) error {
	for i, f := range files {
		fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("file %d: %w", i, err)
		}
		dup := os.NewFile(uintptr(fd), f.Name())
		ln, err := listenUnix(filepath.Join(x.dir, filePrefix+strconv.Itoa(i)))
		if err != nil {
			dup.Close()
			return err
		}
		x.mu.Lock()
		x.lns = append(x.lns, ln)
		x.files = append(x.files, dup)
		x.mu.Unlock()
		x.accept.Go(func() {
			c, err := ln.Accept()
			ln.Close() // once: the next request finds no socket
			if err != nil {
				dup.Close()
				return
			}
			defer c.Close()
			io.Copy(c, io.LimitReader(dup, MaxFileSize))
			dup.Close()
		})
	}
	return nil
}

// close revokes the session (session.json goes first: the next request is refused), waits
// up to DrainTimeout for the streams' copies, then removes the directory. A session that
// another export replaced meanwhile is not this one's to end: its session.json names another
// token, and is left, with its directory (each step under the dispatch's lock).
func (x *exported) close() error {
	x.once.Do(func() {
		x.err = x.locked(func() (bool, error) {
			// The stored row of this token goes first, whatever stands locally: it alone
			// would let another replica take the session back after a takeover. A row of
			// another token (a re-export) is not this session's and stays.
			// When the store refuses (a replica whose fence shut), the local file still goes:
			// a session is better ended here than left.
			serr := x.reg.deleteStored(context.Background(), x.id, x.sum)
			rec, err := loadRecord(x.reg.Dir, x.id)
			if errors.Is(err, ErrNoSession) || err == nil && rec.TokenSHA256 != x.sum {
				return false, serr // revoked already, or replaced: not ours
			}
			// Ours, or unreadable (fail closed: no token of a broken session should work).
			if err := os.Remove(filepath.Join(x.dir, sessionFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return false, errors.Join(serr, fmt.Errorf("revoke gateway session: %w", err))
			}
			return false, serr
		})
		x.drain()
		x.stop()
		err := x.locked(func() (bool, error) {
			if _, err := os.Lstat(filepath.Join(x.dir, sessionFile)); !errors.Is(err, fs.ErrNotExist) {
				return false, nil // another export's session stands there now
			}
			if err := os.RemoveAll(x.dir); err != nil {
				return false, fmt.Errorf("remove gateway session: %w", err)
			}
			return true, nil
		})
		x.err = cmp.Or(x.err, err)
	})
	return x.err
}

// locked runs f under the dispatch's lock, which f's first result says to drop (the session
// is gone). Without the lock (it could not be taken) f runs all the same: a session is better
// ended than left.
func (x *exported) locked(f func() (bool, error)) error {
	unlock, lerr := x.reg.lockDispatch(context.Background(), x.id)
	drop, err := f()
	if lerr == nil {
		unlock(drop)
	}
	return err
}

// drain waits, at most DrainTimeout, until no stream copy is in flight. It polls: a relay
// the server began before the revocation may still connect while it waits.
func (x *exported) drain() {
	deadline := time.Now().Add(DrainTimeout)
	for time.Now().Before(deadline) {
		x.mu.Lock()
		n := len(x.active)
		x.mu.Unlock()
		if n == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop closes every listener, stream connection and unserved file, and waits for the
// goroutines that served them.
func (x *exported) stop() {
	x.mu.Lock()
	for _, ln := range x.lns {
		ln.Close()
	}
	x.mu.Unlock()
	x.accept.Wait()
	x.mu.Lock()
	for c := range x.active {
		c.Close()
	}
	x.mu.Unlock()
	x.conns.Wait()
	x.mu.Lock()
	for _, f := range x.files {
		f.Close()
	}
	x.mu.Unlock()
}

// lockedWriter serialises writes of concurrent stream connections.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer // nil discards
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w == nil {
		return len(p), nil
	}
	return l.w.Write(p)
}
