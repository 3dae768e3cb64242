package netgw

import (
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agora-dev/agora/internal/compute/remote"
)

// Tunnel limits.
const (
	// MaxTunnels caps the tunnels of one dispatch at once: enough for an agent's parallel
	// model calls and fetches, and few enough that a handful of dispatches cannot fill the
	// shared pool (MaxConns) alone.
	MaxTunnels = 128
	// TunnelIdleTimeout closes a tunnel that carried no byte in either direction for so
	// long. It is longer than the model gateway's default model timeout (10 min), the
	// longest a model call may leave a tunnel silent.
	TunnelIdleTimeout = 11 * time.Minute
	// revokeCheck is how often a dispatch's open tunnels check that its session still stands
	// (revoke.go) and each that it is not idle; a revoked session's tunnels close within it.
	revokeCheck = time.Second
)

// serveTunnel upgrades the connection to a byte stream to the host socket the session lists
// under the route's mount and name, and splices the two until either ends or the session is
// revoked.
func (s *Server) serveTunnel(w http.ResponseWriter, r *http.Request, rec *record, rt route) {
	hostPath, ok := rec.socketPath(rt.name, rt.socket)
	if !ok {
		httpError(w, http.StatusNotFound, "no such socket")
		return
	}
	if r.Method != http.MethodGet || !headerHas(r.Header, "Connection", "upgrade") || !strings.EqualFold(r.Header.Get("Upgrade"), remote.TunnelUpgrade) {
		httpError(w, http.StatusUpgradeRequired, "a tunnel needs Upgrade: "+remote.TunnelUpgrade)
		return
	}
	if !s.tunnels.reserve(rec.Dispatch) {
		httpError(w, http.StatusTooManyRequests, "too many tunnels for this dispatch")
		return
	}
	defer s.tunnels.release(rec.Dispatch)
	up, err := dialUnix(r.Context(), hostPath)
	if err != nil {
		httpError(w, http.StatusBadGateway, "the host socket does not answer")
		return
	}
	defer up.Close()
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		httpError(w, http.StatusInternalServerError, "cannot upgrade")
		return
	}
	defer conn.Close()
	conn.SetDeadline(time.Time{})
	if _, err := io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: "+remote.TunnelUpgrade+"\r\n\r\n"); err != nil {
		return
	}
	id := s.tunnels.add(rec.Dispatch, conn)
	defer s.tunnels.remove(rec.Dispatch, id)
	revoked, unwatch := s.tunnels.watchSession(s.Registry.Dir, rec.Dispatch, rec.TokenSHA256)
	defer unwatch()
	act := newActivity()
	stop := make(chan struct{})
	var watcher sync.WaitGroup
	defer watcher.Wait()
	defer close(stop)
	watcher.Go(func() {
		if reason := s.watchTunnel(revoked, act, stop); reason != "" {
			// Both ends: the worker's, and the host socket's, whose server may never close
			// on its own (an idle upstream, a half-read request).
			conn.Close()
			up.Close()
			s.logger().Info("gateway tunnel closed", "dispatch_id", rec.Dispatch, "socket", rt.name+"/"+rt.socket, "reason", reason)
		}
	})
	splice(conn, &activeReader{r: brw.Reader, act: act}, up.(*net.UnixConn), act)
}

// splice copies both ways until both directions end; the end of one direction is passed on
// as a half close. Every read either way is recorded in act.
func splice(conn net.Conn, fromWorker io.Reader, up *net.UnixConn, act *activity) {
	var wg sync.WaitGroup
	wg.Go(func() {
		copyPooled(up, fromWorker)
		up.CloseWrite()
	})
	copyPooled(conn, &activeReader{r: up, act: act})
	if cw, ok := conn.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	// The host side ended: the worker's side has nothing more to say to it.
	conn.SetReadDeadline(time.Now().Add(IOTimeout))
	wg.Wait()
}

// copyBuffers are the tunnels' copy buffers: the readers that count activity hide the
// connections' own copy paths, so io.Copy would allocate 32 KiB per direction per tunnel.
var copyBuffers = sync.Pool{New: func() any { return new([32 << 10]byte) }}

func copyPooled(dst io.Writer, src io.Reader) {
	buf := copyBuffers.Get().(*[32 << 10]byte)
	defer copyBuffers.Put(buf)
	io.CopyBuffer(dst, src, buf[:])
}

// watchTunnel returns once the tunnel must close, saying why: its session was revoked (the
// revoked channel closed), or the tunnel was idle for the idle timeout. It returns "" when
// stop closes first.
func (s *Server) watchTunnel(revoked <-chan struct{}, act *activity, stop <-chan struct{}) string {
	idle := s.TunnelIdleTimeout
	if idle <= 0 {
		idle = TunnelIdleTimeout
	}
	t := time.NewTicker(revokeCheck)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return ""
		case <-revoked:
			return "revoked"
		case <-t.C:
		}
		if act.idleFor() >= idle {
			return "idle"
		}
	}
}

// activity is when a tunnel last carried a byte, either way.
type activity struct{ last atomic.Int64 }

func newActivity() *activity {
	a := &activity{}
	a.last.Store(time.Now().UnixNano())
	return a
}

func (a *activity) idleFor() time.Duration {
	return time.Duration(time.Now().UnixNano() - a.last.Load())
}

// activeReader records in act every read that brings bytes.
type activeReader struct {
	r   io.Reader
	act *activity
}

func (a *activeReader) Read(p []byte) (int, error) {
	n, err := a.r.Read(p)
	if n > 0 {
		a.act.last.Store(time.Now().UnixNano())
	}
	return n, err
}

// headerHas reports whether the comma-separated header h lists token (case-insensitive).
func headerHas(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// tunnelSet tracks open tunnels: to cap them per dispatch and close them all at shutdown.
type tunnelSet struct {
	mu      sync.Mutex
	next    int
	count   map[string]int             // guarded by mu: reserved tunnels per dispatch
	open    map[int]net.Conn           // guarded by mu
	watches map[watchKey]*sessionWatch // guarded by mu: the sessions open tunnels watch
}

func (t *tunnelSet) reserve(id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.count == nil {
		t.count = map[string]int{}
	}
	if t.count[id] >= MaxTunnels {
		return false
	}
	t.count[id]++
	return true
}

func (t *tunnelSet) release(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.count[id]--; t.count[id] <= 0 {
		delete(t.count, id)
	}
}

func (t *tunnelSet) add(_ string, c net.Conn) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.open == nil {
		t.open = map[int]net.Conn{}
	}
	t.next++
	t.open[t.next] = c
	return t.next
}

func (t *tunnelSet) remove(_ string, id int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.open, id)
}

func (t *tunnelSet) closeAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range t.open {
		c.Close()
	}
}
