package obs

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
)

// Limits of the metrics listener: a scraper or a probe sends one small request at a time.
const (
	metricsMaxConns          = 64
	metricsReadHeaderTimeout = 5 * time.Second
	metricsReadTimeout       = 10 * time.Second
	metricsWriteTimeout      = 30 * time.Second
	metricsShutdownTimeout   = 2 * time.Second
)

// ListenerConfig is serve's --metrics listener: /metrics, /healthz and /readyz without a
// token, so it answers only requests addressed to it (the Host and Origin checks of --http
// and MCP HTTP): a page on another site that rebinds its DNS name to this address reads
// nothing.
type ListenerConfig struct {
	// Addr is HOST:PORT, already accepted by [CheckBind].
	Addr string
	// AllowHosts are extra names a request's Host and Origin may carry (a DNS name a
	// scraper uses for an exposed listener; an address is always accepted).
	AllowHosts []string
	// Handlers are served by pattern ("GET /metrics").
	Handlers map[string]http.Handler
	Log      *slog.Logger
	// Listening, when set, is called with the bound address before the first request.
	Listening func(net.Addr)
}

// ListenerHandler is the whole request path of the metrics listener bound at bound: the Host
// and Origin checks first, then the handlers.
func ListenerHandler(cfg ListenerConfig, bound net.Addr) http.Handler {
	names := hostcheck.New(cfg.Addr, bound, cfg.AllowHosts)
	mux := http.NewServeMux()
	for pattern, h := range cfg.Handlers {
		mux.Handle(pattern, h)
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Cache-Control", "no-store")
		var refused string
		switch {
		case !names.HostOK(r):
			refused = "forbidden: the Host header does not name this server"
		case !names.OriginOK(r):
			refused = "forbidden: cross-origin requests are not allowed"
		}
		if refused != "" {
			log.Warn("metrics request refused", "status", http.StatusForbidden, "remote", r.RemoteAddr, "path", r.URL.Path, "reason", refused)
			http.Error(w, refused, http.StatusForbidden)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// ServeListener serves cfg until ctx ends.
func ServeListener(ctx context.Context, cfg ListenerConfig) error {
	ln, err := httplisten.Listen(cfg.Addr, metricsMaxConns)
	if err != nil {
		return fmt.Errorf("metrics listener: %w", err)
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	srv := &http.Server{
		Handler:           ListenerHandler(cfg, ln.Addr()),
		ReadHeaderTimeout: metricsReadHeaderTimeout,
		ReadTimeout:       metricsReadTimeout,
		WriteTimeout:      metricsWriteTimeout,
		ConnState:         httplisten.ConnState, // idle connections yield when the listener is full
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	log.Info("metrics listening", "addr", ln.Addr().String())
	if cfg.Listening != nil {
		cfg.Listening(ln.Addr())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err = <-errc:
	case <-ctx.Done():
		shut, cancel := context.WithTimeout(context.WithoutCancel(ctx), metricsShutdownTimeout)
		if srv.Shutdown(shut) != nil {
			srv.Close()
		}
		cancel()
		err = <-errc
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("metrics listener: %w", err)
	}
	return nil
}
