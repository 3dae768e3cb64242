package netgw

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agora-dev/agora/internal/compute/remote"
)

// Limits of the server.
const (
	// MaxHeaderBytes caps a request's header.
	MaxHeaderBytes = 16 << 10
	// ReadHeaderTimeout bounds a TLS handshake and reading a request's header.
	ReadHeaderTimeout = 5 * time.Second
	// IdleTimeout closes a keep-alive connection with no request. It is longer than the
	// worker's client keeps an idle connection (30 s), so the client closes first and never
	// sends on a connection the server is closing.
	IdleTimeout = 45 * time.Second
	// IOTimeout bounds each read or write of a body: a peer that stalls longer is cut off.
	IOTimeout = 60 * time.Second
	// shutdownTimeout bounds a graceful stop.
	shutdownTimeout = 5 * time.Second
)

// Server serves the sessions of a [Registry] on TLS 1.3: the routes of package remote, each
// authorised by the dispatch's bearer token. It moves bytes only: the model gateway, the
// egress proxy and every decision stay with the dispatch's supervisor, behind the sockets it
// tunnels to.
type Server struct {
	Registry *Registry
	// Version is the host agora's version, reported in GET session.
	Version string
	// Slots are the warm slots whose workers claim their dispatch here (slot.go); nil
	// serves no slot route.
	Slots *Slots
	// Pods verifies the projected tokens of agent-sandbox pool pods that enrol for a slot
	// (pool.go); nil serves no enrolment route.
	Pods PodVerifier
	// ClaimWait is how long a claim waits for its dispatch; 0 means [ClaimWait].
	ClaimWait time.Duration
	// Log receives one line per refused request and per upload; nil discards. No line
	// carries a token.
	Log *slog.Logger
	// MaxUploadBytes caps the bytes of regular files in one upload of any session; 0 means
	// [MaxUploadBytes]. A session exported with a disk limit (its target's disk) is capped
	// by that too, whichever is lower.
	MaxUploadBytes int64
	// MaxUploadEntries caps the entries of one upload; 0 means [MaxUploadEntries].
	MaxUploadEntries int

	// Connection limits; 0 means the constant of the same name. Connections over a limit
	// are closed, never queued.
	MaxConns            int
	MaxPending          int
	MaxPendingPerSource int
	MaxConnsPerDispatch int
	// ReservePerDispatch is how many connections each dispatch holds beyond the reach of the
	// shared pool (MaxConns); 0 means [ReservePerDispatch], below 0 none.
	ReservePerDispatch int
	// PreAuthTimeout bounds a connection's life before a valid token; 0 means
	// [PreAuthTimeout].
	PreAuthTimeout time.Duration
	// TunnelIdleTimeout closes a tunnel that carried no byte either way for that long; 0
	// means [TunnelIdleTimeout].
	TunnelIdleTimeout time.Duration
	// Fence, when set, is asked before every request is served and before an upload is
	// stored (store.CheckFence: the leader Lease's fence): while it refuses, every
	// request is answered 503, which the worker retries, reaching the replica that leads
	// through the gateway's Service. A replica that lost the Lease accepts no session.
	Fence func() error

	tunnels tunnelSet
	conns   *connTable
	waiters claimWaiters
	pool    poolSlots
}

// TLSConfig returns the server's TLS configuration for cert: TLS 1.3 only, HTTP/1.1 only
// (a tunnel is an HTTP/1.1 upgrade).
func TLSConfig(cert tls.Certificate) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		NextProtos:   []string{"http/1.1"},
	}
}

// Serve serves TLS connections accepted on ln until ctx is done, then stops: requests in
// flight get shutdownTimeout, tunnels are closed.
func (s *Server) Serve(ctx context.Context, ln net.Listener, cert tls.Certificate) error {
	if s.conns == nil { // a test may build the table first, to read it without a race
		s.conns = s.newConnTable()
	}
	srv := &http.Server{
		Handler:           http.HandlerFunc(s.serveHTTP),
		ConnContext:       withConn,
		ReadHeaderTimeout: min(ReadHeaderTimeout, s.conns.preAuth),
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		// No HTTP/2: tunnels hijack HTTP/1.1 connections.
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
		ErrorLog:     slog.NewLogLogger(s.logger().Handler(), slog.LevelDebug),
		BaseContext:  func(net.Listener) context.Context { return ctx },
	}
	tl := tls.NewListener(&gateListener{Listener: ln, t: s.conns}, TLSConfig(cert))
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(tl) }()
	select {
	case err := <-errc:
		s.tunnels.closeAll()
		s.pool.closeAll()
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	s.tunnels.closeAll()
	<-errc
	// The enrolled pool pods' slots were this process's to hold: revoked, never claimable.
	s.pool.closeAll()
	if errors.Is(err, context.DeadlineExceeded) {
		srv.Close()
		err = nil
	}
	return err
}

// newConnTable makes the connection table of the server's limits.
func (s *Server) newConnTable() *connTable {
	or := func(v, def int) int {
		if v > 0 {
			return v
		}
		return def
	}
	t := &connTable{
		maxConns: or(s.MaxConns, MaxConns), maxPending: or(s.MaxPending, MaxPending),
		maxPerSource: or(s.MaxPendingPerSource, MaxPendingPerSource), maxPerDispatch: or(s.MaxConnsPerDispatch, MaxConnsPerDispatch),
		reserve: or(s.ReservePerDispatch, ReservePerDispatch), preAuth: PreAuthTimeout,
	}
	if s.ReservePerDispatch < 0 {
		t.reserve = 0
	}
	if s.PreAuthTimeout > 0 {
		t.preAuth = s.PreAuthTimeout
	}
	log := s.logger()
	t.refusals = &refusalLog{log: func(reason, source string, suppressed int) {
		log.Warn("gateway connection refused", "source", source, "reason", reason, "suppressed", suppressed)
	}}
	return t
}

func (s *Server) logger() *slog.Logger {
	if s.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Log
}

// httpError answers with status and a one-line message; messages name no token.
func httpError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	io.WriteString(w, msg+"\n")
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	gc := connOf(r.Context())
	if gc == nil {
		// Fail closed: a request on a connection the table does not count is refused.
		w.Header().Set("Connection", "close")
		httpError(w, http.StatusInternalServerError, "connection not admitted")
		return
	}
	// A connection that has not shown a valid token ends with this request's reply,
	// whatever it is: an unauthenticated peer gets one request per connection.
	pending := !s.conns.charged(gc)
	if pending {
		w.Header().Set("Connection", "close")
	}
	if r.URL.EscapedPath() == ReadyPath {
		s.serveReady(w, r)
		return
	}
	if err := s.fenced(); err != nil {
		s.logger().Warn("gateway request refused: this replica does not lead", "source", gc.source, "err", err.Error())
		w.Header().Set("Connection", "close")
		w.Header().Set("Retry-After", "1")
		httpError(w, http.StatusServiceUnavailable, "this gateway's serve does not lead; retry")
		return
	}
	if strings.HasPrefix(r.URL.EscapedPath(), remote.SlotRoutePrefix) {
		s.serveClaim(w, r, gc, pending)
		return
	}
	if r.URL.EscapedPath() == remote.EnrollRoute {
		s.serveEnroll(w, r)
		return
	}
	rt, err := parseRoute(r.URL.EscapedPath())
	if err != nil || r.URL.RawQuery != "" {
		httpError(w, http.StatusNotFound, "no such route")
		return
	}
	rec, ok := s.authorize(w, r, rt)
	if !ok {
		return
	}
	if pending {
		if ok, reason := s.conns.claim(gc, rec.Dispatch, rt.kind == routeSockets); !ok {
			s.logger().Warn("gateway connection refused", "dispatch_id", rec.Dispatch, "source", gc.source, "reason", reason)
			httpError(w, http.StatusTooManyRequests, reason)
			return
		}
		w.Header().Del("Connection")
	}
	switch rt.kind {
	case routeSession:
		s.serveSession(w, r, rec)
	case routeMounts:
		s.serveMount(w, r, rec, rt)
	case routeFiles:
		s.serveFile(w, r, rec, rt)
	case routeStreams:
		s.serveStream(w, r, rec, rt)
	case routeSockets:
		s.serveTunnel(w, r, rec, rt)
	default:
		httpError(w, http.StatusNotFound, "no such route")
	}
}

// authorize checks the bearer token against the session of the route's dispatch, in
// constant time. No session (never registered, or revoked) or no token is 401; a token that
// is not this dispatch's is 403, and logged without the token.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request, rt route) (*record, bool) {
	token, ok := bearer(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="agora"`)
		httpError(w, http.StatusUnauthorized, "a bearer token is required")
		return nil, false
	}
	rec, err := s.Registry.standing(r.Context(), rt.dispatch)
	if errors.Is(err, errNotHere) {
		if !rec.checkToken(token) {
			s.logger().Warn("gateway token refused", "dispatch_id", rt.dispatch, "route", rt.kind, "remote_addr", r.RemoteAddr)
			httpError(w, http.StatusForbidden, "the token does not authorise this dispatch")
			return nil, false
		}
		// Exported by the replica this one took over from: the adoption takes it back
		// within seconds (dispatch's adopt loop); the worker retries a 503.
		w.Header().Set("Retry-After", "1")
		httpError(w, http.StatusServiceUnavailable, "the session is being taken over by this gateway's serve; retry")
		return nil, false
	}
	if errors.Is(err, ErrNoSession) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="agora"`)
		httpError(w, http.StatusUnauthorized, "no session for this dispatch: it ended or was never exported")
		return nil, false
	}
	if err != nil {
		s.logger().Error("gateway session unreadable", "dispatch_id", rt.dispatch, "err", err)
		if hostFailure(err) {
			retryLater(w, "read the session") // out of descriptors, a failing disk: not the session's fault
			return nil, false
		}
		httpError(w, http.StatusInternalServerError, "session unreadable")
		return nil, false
	}
	if !rec.checkToken(token) {
		s.logger().Warn("gateway token refused", "dispatch_id", rt.dispatch, "route", rt.kind, "remote_addr", r.RemoteAddr)
		httpError(w, http.StatusForbidden, "the token does not authorise this dispatch")
		return nil, false
	}
	return rec, true
}

// bearer returns the request's bearer token, which must be one of ours by its shape.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Values("Authorization")
	if len(h) != 1 {
		return "", false
	}
	token, ok := strings.CutPrefix(h[0], "Bearer ")
	if !ok || !strings.HasPrefix(token, TokenPrefix) || len(token) > 128 {
		return "", false
	}
	return token, true
}

func (s *Server) serveSession(w http.ResponseWriter, r *http.Request, rec *record) {
	if r.Method != http.MethodGet {
		httpError(w, http.StatusMethodNotAllowed, "GET only")
		return
	}
	info := remote.Info{Dispatch: rec.Dispatch, Version: s.Version, Files: rec.Files, Mounts: []remote.Mount{}}
	for _, m := range rec.Mounts {
		info.Mounts = append(info.Mounts, m.Mount)
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(info)
}

func (s *Server) serveMount(w http.ResponseWriter, r *http.Request, rec *record, rt route) {
	m, ok := rec.mount(rt.name)
	if !ok {
		httpError(w, http.StatusNotFound, "no such mount")
		return
	}
	switch {
	case r.Method == http.MethodGet && m.Fetch && m.Src == "":
		// Taken over from a replica whose disk held it, and not made again here (restore).
		httpError(w, http.StatusGone, "the mount's content was on the replica that led before a takeover, and is not served here")
	case r.Method == http.MethodGet && m.Fetch:
		s.download(w, r, rec, m)
	case r.Method == http.MethodPut && m.Result:
		s.upload(w, r, rec, m)
	case r.Method == http.MethodGet:
		httpError(w, http.StatusNotFound, "the mount has no content to fetch")
	case r.Method == http.MethodPut:
		httpError(w, http.StatusForbidden, "the mount is not a result: nothing is uploaded to it")
	default:
		httpError(w, http.StatusMethodNotAllowed, "GET or PUT only")
	}
}

// serveFile relays spec.Files[I] from the exporter's socket, once: the exporter stops
// listening after the first connection.
func (s *Server) serveFile(w http.ResponseWriter, r *http.Request, rec *record, rt route) {
	if r.Method != http.MethodGet {
		httpError(w, http.StatusMethodNotAllowed, "GET only")
		return
	}
	if rt.index >= rec.Files {
		httpError(w, http.StatusNotFound, "no such file")
		return
	}
	sd, _ := sessionDir(s.Registry.Dir, rec.Dispatch)
	c, err := dialUnix(r.Context(), sd+"/"+filePrefix+strconv.Itoa(rt.index))
	if err != nil {
		httpError(w, http.StatusGone, "the file was served already")
		return
	}
	defer c.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	rc := http.NewResponseController(w)
	io.Copy(&deadlineWriter{w: w, rc: rc}, io.LimitReader(c, MaxFileSize))
}

// serveStream relays a stream's body to the exporter. It answers 200 at once and keeps the
// answer open while the body flows (full duplex), so the worker learns at once when the
// gateway goes away (its answer ends) and sends what it writes next on a new stream instead of
// into a dead connection. When the body ends, it waits until the exporter has copied all of it
// (it closes its end) and only then writes [StreamDone]: a worker that read it knows its
// output reached the supervisor before the session can be closed.
func (s *Server) serveStream(w http.ResponseWriter, r *http.Request, rec *record, rt route) {
	if r.Method != http.MethodPost {
		httpError(w, http.StatusMethodNotAllowed, "POST only")
		return
	}
	name := stdoutSocket
	if rt.name == "stderr" {
		name = stderrSocket
	}
	sd, _ := sessionDir(s.Registry.Dir, rec.Dispatch)
	c, err := dialUnix(r.Context(), sd+"/"+name)
	if err != nil {
		httpError(w, http.StatusServiceUnavailable, "the stream's reader is gone")
		return
	}
	defer c.Close()
	rc := http.NewResponseController(w)
	if err := rc.EnableFullDuplex(); err != nil {
		httpError(w, http.StatusInternalServerError, "stream: "+err.Error())
		return
	}
	// A stream has no idle timeout: a worker may be quiet for as long as its agent thinks.
	// It ends with the worker, or when the session is closed (the exporter's end goes).
	rc.SetReadDeadline(time.Time{})
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return
	}
	// The exporter only reads; its end closes once it has copied all (after the body's end)
	// or when it stops (its session closed, its process gone). Then the stream is over: a
	// quiet worker's POST must not hold its connection past its session.
	var (
		exporterDone = make(chan struct{})
		mu           sync.Mutex
		bodyDone     bool // guarded by mu: rc is not to be touched by the goroutine any more
	)
	go func() {
		io.Copy(io.Discard, c)
		close(exporterDone)
		mu.Lock()
		if !bodyDone {
			rc.SetReadDeadline(time.Now()) // ends a body read still waiting for the worker
		}
		mu.Unlock()
	}()
	_, err = io.Copy(c, r.Body)
	mu.Lock()
	bodyDone = true
	mu.Unlock()
	c.(*net.UnixConn).CloseWrite()
	if err != nil {
		return // the answer ends without StreamDone: the worker sends the rest again
	}
	select {
	case <-exporterDone:
	case <-time.After(IOTimeout):
		return
	}
	io.WriteString(w, remote.StreamDone)
}

// deadlineReader extends the connection's read deadline before every read of a body: a
// stalled peer is cut off after IOTimeout, a slow steady one is not.
type deadlineReader struct {
	r  io.Reader
	rc *http.ResponseController
}

func (d *deadlineReader) Read(p []byte) (int, error) {
	d.rc.SetReadDeadline(time.Now().Add(IOTimeout))
	return d.r.Read(p)
}

// deadlineWriter extends the write deadline before every write of a body.
type deadlineWriter struct {
	w  io.Writer
	rc *http.ResponseController
}

func (d *deadlineWriter) Write(p []byte) (int, error) {
	d.rc.SetWriteDeadline(time.Now().Add(IOTimeout))
	return d.w.Write(p)
}

// ReadyPath answers 200 while this gateway serves as the leader (its Fence passes, or it has
// none) and 503 otherwise, without a token: the readiness probe of deploy/helm's replicas, so
// that the gateway's Service has the leader alone as its endpoint (a standby does not listen,
// and one whose fence shut answers 503). It tells nothing but that.
const ReadyPath = "/readyz"

func (s *Server) serveReady(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Connection", "close")
	if r.Method != http.MethodGet {
		httpError(w, http.StatusMethodNotAllowed, "GET only")
		return
	}
	if s.fenced() != nil {
		httpError(w, http.StatusServiceUnavailable, "not the leader")
		return
	}
	httpError(w, http.StatusOK, "leader")
}

// fenced is the Fence's answer now: nil while this replica leads, or without a fence.
func (s *Server) fenced() error {
	if s.Fence == nil {
		return nil
	}
	return s.Fence()
}
