package web

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/agora-dev/agora/internal/hostcheck"
	"github.com/agora-dev/agora/internal/httplisten"
	"github.com/agora-dev/agora/internal/mcpserver"
)

// Limits of the listener. An event stream stays open while its page does, so there is no
// write timeout; every other request is small.
const (
	maxHeaderBytes    = 32 << 10
	maxFormBytes      = 64 << 10
	maxConns          = 512
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 30 * time.Second
	idleTimeout       = 60 * time.Second
	shutdownTimeout   = 5 * time.Second
)

// Config is how the run view listens and whom it serves.
type Config struct {
	// Addr is HOST:PORT. Anything but 127.0.0.1, ::1 or localhost needs AllowAny.
	Addr string
	// Clients are the only people and programs served, each with its own token; a client
	// whose ceiling is orchestrate is an operator and may act, every other one only reads.
	// The tokens are those of MCP HTTP (AGORA_HTTP_TOKEN, AGORA_HTTP_TOKENS_FILE).
	Clients []mcpserver.Client
	// AllowAny says AGORA_HTTP_ALLOW_ANY held [mcpserver.AllowAnyValue].
	AllowAny bool
	// AllowHosts are extra names a request's Host and Origin may carry.
	AllowHosts []string
	// HostPaths are paths on this host a read-only viewer never sees in any text (AGORA_HOME);
	// the repositories of the runs and dispatches shown are hidden too (hostpaths.go).
	HostPaths []string
	// Mount are handlers served behind the same checks and login (obs's /metrics, /healthz,
	// /readyz), by pattern.
	Mount map[string]http.Handler
	Log   *slog.Logger
	Now   func() time.Time
	// Listening, when set, is called with the bound address before the first request.
	Listening func(net.Addr)
	// OIDC, when set, offers the sign-in from an identity provider (oidc.go) beside the
	// tokens.
	OIDC *OIDC
}

// Check reports whether cfg may start, binding nothing: a valid token for every client (the
// rules of MCP HTTP) and a loopback address or the explicit opt-in.
func Check(cfg Config) error {
	if err := mcpserver.CheckHTTP(mcpserver.HTTPConfig{Addr: cfg.Addr, Clients: cfg.Clients, AllowAny: cfg.AllowAny}); err != nil {
		return fmt.Errorf("web run view: %w", err)
	}
	if cfg.OIDC != nil && (cfg.OIDC.Verifier == nil || !cfg.OIDC.Verifier.Config().Web.Enabled()) {
		return errors.New("web run view: the identity provider's sign-in needs a verifier of auth.oidc.web (oidcauth.NewWeb)")
	}
	return nil
}

// Server is the run view.
type Server struct {
	cfg      Config
	src      Sources
	log      *slog.Logger
	now      func() time.Time
	auth     *authenticator
	hub      *hub
	pages    *pages
	tailTick time.Duration
	verified *verifyCache // nil without Sources.VerifyRun
	// reads bounds the requests reading at once, fairly between clients (gate.go);
	// summaries and shapes keep what a run's pages read again and again (summary.go,
	// shape.go).
	reads     *gate
	summaries *summaries
	shapes    *shapes
	// streams bounds each client's open event streams (streams.go).
	streams streamCounts
	// flows are the provider sign-ins under way (oidc.go).
	flows flows
}

// New builds the run view over src. It starts nothing.
func New(cfg Config, src Sources) (*Server, error) {
	if err := Check(cfg); err != nil {
		return nil, err
	}
	if src.Orch == nil || src.Runs == nil || src.Dispatches == nil {
		return nil, errors.New("web run view: the orchestrator, its runs and the dispatch records are required")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	p, err := newPages()
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, src: src, log: cfg.Log, now: cfg.Now, pages: p, tailTick: 500 * time.Millisecond}
	s.auth = newAuthenticator(cfg.Clients, cfg.Now)
	s.hub = newHub(src.Orch)
	s.reads, s.summaries, s.shapes = newGate(maxReads), newSummaries(src.Runs, cfg.Now), newShapes(src.Runs)
	if src.VerifyRun != nil {
		s.verified = newVerifyCache(src.VerifyRun, cfg.Now)
	}
	return s, nil
}

// Serve listens on cfg.Addr and serves until ctx ends. It refuses to start, binding nothing,
// when [Check] fails.
func (s *Server) Serve(ctx context.Context) error {
	ln, err := httplisten.Listen(s.cfg.Addr, maxConns)
	if err != nil {
		return fmt.Errorf("web run view: %w", err)
	}
	srv := &http.Server{
		Handler:           s.Handler(ln.Addr()),
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ConnState:         httplisten.ConnState, // idle connections yield when the listener is full
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	s.log.Info("web run view listening", "addr", ln.Addr().String(), "clients", len(s.cfg.Clients))
	if s.cfg.Listening != nil {
		s.cfg.Listening(ln.Addr())
	}
	hubDone := make(chan struct{})
	go func() { defer close(hubDone); s.hub.run(ctx) }()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err = <-errc:
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
		if srv.Shutdown(sctx) != nil {
			srv.Close()
		}
		cancel()
		err = <-errc
	}
	<-hubDone
	if s.cfg.OIDC != nil {
		s.cfg.OIDC.Verifier.CloseIdleConnections()
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("web run view: %w", err)
	}
	return nil
}

// Handler is the whole request path behind a listener bound at addr: the Host and Origin
// checks, then the security headers, then the login, then the routes.
func (s *Server) Handler(addr net.Addr) http.Handler {
	names := hostcheck.New(s.cfg.Addr, addr, s.cfg.AllowHosts)
	routes := s.routes()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		secureHeaders(w.Header())
		if !names.HostOK(r) {
			s.refuse(w, r, http.StatusForbidden, "forbidden: the Host header does not name this server")
			return
		}
		if !names.OriginOK(r) && !s.callbackNavigation(r) {
			s.refuse(w, r, http.StatusForbidden, "forbidden: cross-origin requests are not allowed")
			return
		}
		routes.ServeHTTP(w, r)
	})
}

// csp allows nothing but this origin's own script, style and images, no inline code, no
// frames and no form target elsewhere.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

func secureHeaders(h http.Header) {
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	// same-origin, not no-referrer: under no-referrer Chromium sends "Origin: null" with a
	// form POST, which the Origin check must refuse; other origins still get no referrer.
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
}

func (s *Server) refuse(w http.ResponseWriter, r *http.Request, code int, msg string) {
	s.log.Warn("web request refused", "status", code, "remote", r.RemoteAddr, "path", r.URL.Path, "reason", msg)
	http.Error(w, msg, code)
}
