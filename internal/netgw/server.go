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
	// ReadHeaderTimeout bounds reading a request's header.
	ReadHeaderTimeout = 10 * time.Second
	// IdleTimeout closes a keep-alive connection with no request.
	IdleTimeout = 90 * time.Second
	// IOTimeout bounds each read or write of a body: a peer that stalls longer is cut off.
	IOTimeout = 60 * time.Second
	// MaxConns caps the connections the server holds at once, tunnels included.
	MaxConns = 4096
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
	// Log receives one line per refused request and per upload; nil discards. No line
	// carries a token.
	Log *slog.Logger
	// MaxUploadBytes caps the bytes of regular files in one upload; 0 means [MaxUploadBytes].
	MaxUploadBytes int64
	// MaxUploadEntries caps the entries of one upload; 0 means [MaxUploadEntries].
	MaxUploadEntries int

	tunnels tunnelSet
}

// Handler returns the server's HTTP handler (tests serve it without TLS).
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

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
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: ReadHeaderTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		// No HTTP/2: tunnels hijack HTTP/1.1 connections.
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
		ErrorLog:     slog.NewLogLogger(s.logger().Handler(), slog.LevelDebug),
		BaseContext:  func(net.Listener) context.Context { return ctx },
	}
	tl := tls.NewListener(&limitListener{Listener: ln, slots: make(chan struct{}, MaxConns)}, TLSConfig(cert))
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(tl) }()
	select {
	case err := <-errc:
		s.tunnels.closeAll()
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	s.tunnels.closeAll()
	<-errc
	if errors.Is(err, context.DeadlineExceeded) {
		srv.Close()
		err = nil
	}
	return err
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
	rt, err := parseRoute(r.URL.EscapedPath())
	if err != nil || r.URL.RawQuery != "" {
		httpError(w, http.StatusNotFound, "no such route")
		return
	}
	rec, ok := s.authorize(w, r, rt)
	if !ok {
		return
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
	rec, err := loadRecord(s.Registry.Dir, rt.dispatch)
	if errors.Is(err, ErrNoSession) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="agora"`)
		httpError(w, http.StatusUnauthorized, "no session for this dispatch: it ended or was never exported")
		return nil, false
	}
	if err != nil {
		s.logger().Error("gateway session unreadable", "dispatch_id", rt.dispatch, "err", err)
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

// serveStream relays a stream's body to the exporter, then waits until the exporter has
// copied all of it (it closes its end), so a worker whose POST returned knows its output
// reached the supervisor before the session can be closed.
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
	// A stream has no idle timeout: a worker may be quiet for as long as its agent thinks.
	// It ends with the worker, or when the session is closed (the exporter's end goes).
	http.NewResponseController(w).SetReadDeadline(time.Time{})
	_, err = io.Copy(c, r.Body)
	c.(*net.UnixConn).CloseWrite()
	if err != nil {
		httpError(w, http.StatusBadRequest, "stream interrupted")
		return
	}
	c.SetReadDeadline(time.Now().Add(IOTimeout))
	io.Copy(io.Discard, c)
	w.WriteHeader(http.StatusNoContent)
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

// limitListener holds at most cap(slots) accepted connections at once.
type limitListener struct {
	net.Listener
	slots chan struct{}
}

func (l *limitListener) Accept() (net.Conn, error) {
	l.slots <- struct{}{}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &slotConn{Conn: c, release: func() { <-l.slots }}, nil
}

type slotConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
