package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agora-dev/agora/internal/httplisten"
	"github.com/agora-dev/agora/internal/oidcauth"
	"github.com/agora-dev/agora/internal/secret/redact"
)

// HTTP limits. A tool call may block up to maxWait seconds (agora_dispatch's wait_seconds), so
// a response may take that long to write; nothing else may take long.
const (
	httpPath          = "/mcp"
	maxBodyBytes      = maxArgsBytes + 64<<10
	maxHeaderBytes    = 32 << 10
	maxConns          = 256
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 30 * time.Second
	writeTimeout      = (maxWait + 30) * time.Second
	idleTimeout       = 60 * time.Second
	shutdownTimeout   = 10 * time.Second
)

// HTTPConfig is how the streamable HTTP transport listens and whom it serves.
type HTTPConfig struct {
	// Addr is HOST:PORT. Anything but 127.0.0.1, ::1 or localhost needs AllowAny.
	Addr string
	// Clients are the only callers; at least one, each with its own token and ceiling.
	Clients []Client
	// AllowAny says AGORA_HTTP_ALLOW_ANY held [AllowAnyValue].
	AllowAny bool
	// AllowHosts are extra host names a request's Host (and Origin) may carry, beyond the
	// bound address itself: the names clients use to reach a non-loopback bind.
	AllowHosts []string
	Limits     Limits
	// OIDC, when set, also accepts bearer tokens from an OpenID Connect provider;
	// Clients may then be empty.
	OIDC *oidcauth.Verifier
	// Resource is the MCP endpoint's public URL (https://agora.example/mcp), named in the
	// protected resource metadata; default http://ADDR/mcp.
	Resource string
	// Listening, when set, is called with the bound address before the first request is served.
	Listening func(net.Addr)
	// Wrap, when set, wraps the whole request path: the host uses it to take a request's
	// traceparent into its context (the MCP server links no tracing), so what a tool call
	// starts joins the caller's trace.
	Wrap func(http.Handler) http.Handler
}

// CheckHTTP reports whether cfg may start, without binding anything: a token for every
// client, no weak or shared token, a loopback address or the explicit opt-in.
func CheckHTTP(cfg HTTPConfig) error {
	if len(cfg.Clients) == 0 && cfg.OIDC == nil {
		return ErrNoToken
	}
	if len(cfg.Clients) > 0 {
		if err := checkClients(cfg.Clients); err != nil {
			return err
		}
	}
	return CheckBind(cfg.Addr, cfg.AllowAny)
}

// ListenHTTP serves streamable HTTP at /mcp on cfg.Addr until ctx ends, then shuts down
// gracefully. It refuses to start, binding nothing, when [CheckHTTP] fails.
//
// Every request passes, in order: the Host check (it must name the bound address or an
// allowed host: DNS rebinding), the Origin check (none, or one naming an allowed host), the
// path, the bearer token (constant-time, against every client), the client's rate limit and
// in-flight cap (429), the refusal of JSON-RPC batches (400 with a JSON-RPC Invalid Request
// error: each call is one request, so the limits count calls), and a body limit; then the
// SDK's stateless handler, so no session state exists for a client to shed or exhaust.
func (s *Server) ListenHTTP(ctx context.Context, cfg HTTPConfig) error {
	if err := CheckHTTP(cfg); err != nil {
		return err
	}
	s = s.withTokens(cfg.Clients)
	ln, err := httplisten.Listen(cfg.Addr, maxConns)
	if err != nil {
		return err
	}
	h := s.httpHandler(cfg, ln.Addr())
	if cfg.Wrap != nil {
		h = cfg.Wrap(h)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ConnState:         httplisten.ConnState, // idle connections yield when the listener is full
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	s.log.Info("mcp server listening", "addr", ln.Addr().String(), "path", httpPath, "clients", len(cfg.Clients))
	if cfg.Listening != nil {
		cfg.Listening(ln.Addr())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve http: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve http: %w", err)
	}
	s.log.Info("mcp server stopped")
	return nil
}

// withTokens returns a copy of s that masks the clients' tokens in everything it says.
func (s *Server) withTokens(clients []Client) *Server {
	tokens := make([][]byte, len(clients))
	for i, c := range clients {
		tokens[i] = []byte(c.Token)
	}
	c := *s
	c.redactor = redact.New(tokens)
	c.log = slog.New(redactHandler{next: s.cfg.Logger.Handler(), r: c.redactor})
	return &c
}

// httpHandler is the whole request path behind the listener bound at addr.
func (s *Server) httpHandler(cfg HTTPConfig, addr net.Addr) http.Handler {
	byName := make(map[string]Client, len(cfg.Clients))
	for _, c := range cfg.Clients {
		byName[c.Name] = c
	}
	id := func(req mcp.Request) (Principal, bool) {
		extra := req.GetExtra()
		if extra == nil || extra.TokenInfo == nil {
			return Principal{}, false
		}
		if p, ok := principalOf(extra.TokenInfo); ok {
			return p, true
		}
		c, ok := byName[extra.TokenInfo.UserID]
		return Principal{Client: c.Name, Ceiling: c.Ceiling}, ok
	}
	m := s.newMCP(id, nil)
	handler := func(jsonResponse bool) http.Handler {
		return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return m }, &mcp.StreamableHTTPOptions{
			Stateless:           true,
			JSONResponse:        jsonResponse,
			Logger:              s.sdkLog(),
			MaxRequestBodyBytes: maxBodyBytes,
			// httpGuard checks Host for every bind, not only loopback ones, and honours
			// AllowHosts (a proxy on this host); the SDK's narrower check would refuse those.
			DisableLocalhostProtection: true,
		})
	}
	return newHTTPGuard(cfg, addr, s.log).wrap(withRequestContext(progressSplit{plain: handler(true), stream: handler(false)}))
}

// progressSplit answers a request that carries a progress token as an event stream, so its
// progress notifications travel with it (a stateless server has no other stream to send them
// on), and every other request with one plain JSON response.
type progressSplit struct{ plain, stream http.Handler }

func (p progressSplit) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.Body == nil {
		p.plain.ServeHTTP(w, r)
		return
	}
	// The guard capped the body already; the SDK reads it again from the copy.
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
		return
	case err != nil:
		http.Error(w, "read the request body", http.StatusBadRequest)
		return
	}
	if !json.Valid(body) {
		// One POST is one JSON-RPC message. The SDK decodes the first JSON value and ignores
		// what follows, so a body holding a second message, or garbage, after it was acted on
		// in part, and the split (which decodes the whole) could not see its progress token.
		// Refused whole, as JSON-RPC's parse error.
		writeRPCError(w, http.StatusBadRequest, codeParseError, notOneJSONValue)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if !mayCarryProgressToken(body) {
		p.plain.ServeHTTP(w, r)
		return
	}
	var msg struct {
		Params struct {
			Meta struct {
				ProgressToken any `json:"progressToken"`
			} `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) == nil && msg.Params.Meta.ProgressToken != nil {
		p.stream.ServeHTTP(w, r)
		return
	}
	p.plain.ServeHTTP(w, r)
}

// notOneJSONValue refuses a POST body that is not exactly one JSON value.
const notOneJSONValue = "the body is not one JSON value: send one JSON-RPC message per POST"

// mayCarryProgressToken is false when body cannot name a progress token: it holds neither
// the key's bytes nor a \u escape that could spell them. Most calls carry none, and this
// spares them a second decode of the whole body (the SDK decodes it after). A key spelled in
// another case is no progress token to the SDK either.
func mayCarryProgressToken(body []byte) bool {
	return bytes.Contains(body, []byte(`progressToken`)) || bytes.Contains(body, []byte(`\u`))
}

// redactHandler masks the tokens in every log record, as a backstop: nothing logs a token.
type redactHandler struct {
	next slog.Handler
	r    *redact.Redactor
}

func (h redactHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h redactHandler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.String(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h redactHandler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.r.String(v.String()))
	case slog.KindGroup:
		as := v.Group()
		out := make([]any, len(as))
		for i, g := range as {
			out[i] = h.attr(g)
		}
		return slog.Group(a.Key, out...)
	case slog.KindAny:
		return slog.String(a.Key, h.r.String(fmt.Sprint(v.Any())))
	}
	return slog.Attr{Key: a.Key, Value: v}
}

func (h redactHandler) WithAttrs(as []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(as))
	for i, a := range as {
		red[i] = h.attr(a)
	}
	return redactHandler{next: h.next.WithAttrs(red), r: h.r}
}

func (h redactHandler) WithGroup(name string) slog.Handler {
	return redactHandler{next: h.next.WithGroup(name), r: h.r}
}
