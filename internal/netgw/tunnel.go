package netgw

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/agora-dev/agora/internal/compute/remote"
)

// Tunnel limits.
const (
	// MaxTunnels caps the tunnels of one dispatch at once.
	MaxTunnels = 256
	// revokeCheck is how often an open tunnel checks that its session still stands; a
	// revoked session's tunnels close within it.
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
	stop := make(chan struct{})
	defer close(stop)
	go watchRevoke(s.Registry.Dir, rec.Dispatch, rec.TokenSHA256, stop, conn)
	splice(conn, brw.Reader, up.(*net.UnixConn))
}

// splice copies both ways until both directions end; the end of one direction is passed on
// as a half close.
func splice(conn net.Conn, buffered *bufio.Reader, up *net.UnixConn) {
	var wg sync.WaitGroup
	wg.Go(func() {
		io.Copy(up, buffered)
		up.CloseWrite()
	})
	io.Copy(conn, up)
	if cw, ok := conn.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	// The host side ended: the worker's side has nothing more to say to it.
	conn.SetReadDeadline(time.Now().Add(IOTimeout))
	wg.Wait()
}

// watchRevoke closes conn once dispatch id's session is gone or holds another token.
func watchRevoke(dir, id, sum string, stop <-chan struct{}, conn net.Conn) {
	t := time.NewTicker(revokeCheck)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		// Fail closed: a session that cannot be read back ends the tunnel too.
		rec, err := loadRecord(dir, id)
		if err != nil || rec.TokenSHA256 != sum {
			conn.Close()
			return
		}
	}
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
	mu    sync.Mutex
	next  int
	count map[string]int   // guarded by mu: reserved tunnels per dispatch
	open  map[int]net.Conn // guarded by mu
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
