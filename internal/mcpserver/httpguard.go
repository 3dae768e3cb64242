package mcpserver

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"golang.org/x/time/rate"

	"github.com/agora-dev/agora/internal/hostcheck"
	"github.com/agora-dev/agora/internal/oidcauth"
)

// httpGuard is everything a request passes before the SDK sees it.
type httpGuard struct {
	// names are the Host values that name this server (DNS rebinding, cross-site Origin).
	names    *hostcheck.Names
	clients  []tokenSum
	limiters map[string]*rate.Limiter
	inflight map[string]chan struct{}
	log      *slog.Logger
	// oidc, when set, verifies tokens that are no static client's; resource is the
	// MCP endpoint's public URL and dyn the limits of its principals.
	oidc     *oidcauth.Verifier
	resource string
	dyn      *dynLimits
}

// tokenSum is a client's token as the verifier compares it: hashed, so every comparison takes
// the same time whatever the presented token's length.
type tokenSum struct {
	name string
	sum  [sha256.Size]byte
}

func newHTTPGuard(cfg HTTPConfig, addr net.Addr, log *slog.Logger) *httpGuard {
	l := cfg.Limits.withDefaults()
	g := &httpGuard{names: hostcheck.New(cfg.Addr, addr, cfg.AllowHosts), limiters: map[string]*rate.Limiter{}, inflight: map[string]chan struct{}{}, log: log,
		oidc: cfg.OIDC, resource: resourceURL(cfg, addr), dyn: &dynLimits{l: l}}
	for _, c := range cfg.Clients {
		g.clients = append(g.clients, tokenSum{name: c.Name, sum: sha256.Sum256([]byte(c.Token))})
		g.limiters[c.Name] = rate.NewLimiter(rate.Limit(l.Rate), l.Burst)
		g.inflight[c.Name] = make(chan struct{}, l.MaxInFlight)
	}
	return g
}

// challenge is the WWW-Authenticate value of every 401 (RFC 6750).
const challenge = `Bearer realm="agora-mcp"`

func (g *httpGuard) wrap(next http.Handler) http.Handler {
	var skew time.Duration
	if g.oidc != nil {
		skew = g.oidc.Config().ClockSkew
	}
	authed := auth.RequireBearerToken(g.verify, &auth.RequireBearerTokenOptions{ClockSkew: skew})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Del("WWW-Authenticate")
		if p, ok := principalOf(auth.TokenInfoFromContext(r.Context())); ok && !p.Ceiling.Allows(CeilingRead) {
			g.insufficient(w, r, p.Client)
			return
		}
		g.admit(w, r, next)
	}))
	var prm http.Handler
	metaPath := prmPath + httpPath
	if g.oidc != nil {
		prm = g.metadataHandler()
		// A configured resource behind a proxy (https://host/team/mcp) names its metadata at
		// /.well-known/oauth-protected-resource/team/mcp: serve it there too, or the 401's
		// resource_metadata points at nothing.
		if u, err := url.Parse(metadataURL(g.resource)); err == nil && u.Path != "" {
			metaPath = u.Path
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !g.names.HostOK(r) {
			g.refuse(w, r, http.StatusForbidden, "forbidden: the Host header does not name this server")
			return
		}
		if prm != nil && (r.URL.Path == prmPath || r.URL.Path == prmPath+httpPath || r.URL.Path == metaPath) {
			prm.ServeHTTP(w, r) // public, for any origin (RFC 9728 §3)
			return
		}
		if !g.names.OriginOK(r) {
			g.refuse(w, r, http.StatusForbidden, "forbidden: cross-origin requests are not allowed")
			return
		}
		if r.URL.Path != httpPath {
			http.Error(w, "not found: the MCP endpoint is "+httpPath, http.StatusNotFound)
			return
		}
		// Set before the token check so its 401 carries it; a verified request drops it.
		w.Header().Set("WWW-Authenticate", g.challenge401())
		authed.ServeHTTP(w, r)
	})
}

// verify finds the client whose token was presented, comparing against every client in
// constant time.
func (g *httpGuard) verify(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	sum := sha256.Sum256([]byte(token))
	match := -1
	for i, c := range g.clients {
		if subtle.ConstantTimeCompare(sum[:], c.sum[:]) == 1 {
			match = i
		}
	}
	if match < 0 {
		if g.oidc != nil {
			return g.verifyOIDC(ctx, token)
		}
		return nil, auth.ErrInvalidToken
	}
	return &auth.TokenInfo{UserID: g.clients[match].name, Expiration: time.Now().Add(time.Minute)}, nil
}

// admit applies the client's rate limit and in-flight cap, and keeps the token from going any
// further than this check.
func (g *httpGuard) admit(w http.ResponseWriter, r *http.Request, next http.Handler) {
	ti := auth.TokenInfoFromContext(r.Context())
	name := ti.UserID
	lim, sem := g.limiters[name], g.inflight[name]
	if _, ok := principalOf(ti); ok {
		lim, sem = g.dyn.get(name)
	}
	if !lim.Allow() {
		w.Header().Set("Retry-After", "1")
		g.refuse(w, r, http.StatusTooManyRequests, "too many requests: slow down")
		return
	}
	select {
	case sem <- struct{}{}:
		defer func() { <-sem }()
	default:
		w.Header().Set("Retry-After", "1")
		g.refuse(w, r, http.StatusTooManyRequests, "too many requests in flight: wait for one to finish")
		return
	}
	r.Header.Del("Authorization")
	isBatch, err := peekBatch(w, r)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			g.refuse(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit))
			return
		}
		g.refuse(w, r, http.StatusBadRequest, "bad request: the body could not be read")
		return
	}
	if isBatch {
		g.refuseRPC(w, r, http.StatusBadRequest, codeInvalidRequest, batchRefusal)
		return
	}
	next.ServeHTTP(w, r)
}

func (g *httpGuard) refuse(w http.ResponseWriter, r *http.Request, code int, msg string) {
	g.log.Warn("http request refused", "status", code, "remote", r.RemoteAddr, "reason", msg)
	http.Error(w, msg, code)
}

// JSON-RPC's Invalid Request and Parse error codes (JSON-RPC 2.0 §5.1).
const (
	codeInvalidRequest = -32600
	codeParseError     = -32700
)

// peekBufferBytes is the read-ahead of the batch check: it reads only leading whitespace and
// one byte, and the SDK's read of the rest goes straight past a buffer this small.
const peekBufferBytes = 512

// batchRefusal is the one sentence a client that sent a batch reads.
const batchRefusal = "JSON-RPC batches are not accepted: send each request in its own POST"

// peekBatch reports whether r's body is a JSON-RPC batch: its first byte after JSON's
// whitespace (RFC 8259 §2: space, tab, CR, LF) is '['. It consumes only that whitespace, and
// leaves r.Body reading the rest of the body from its first significant byte.
//
// agora refuses batches itself because the SDK would run them. go-sdk v1.8.0
// (mcp/streamable.go, streamableServerConn.servePOST) refuses a batch only when the request's
// MCP-Protocol-Version header is 2025-06-18 or later; a request without the header is taken as
// 2025-03-26, whose batches it still reads and runs call by call, each through the guard of a
// single call but all inside one HTTP request, so one request's worth of rate limit and
// in-flight cap. A client picks whether to send that header, so the SDK's check binds no one.
// (Over stdio its ioConn.Read does the same for a session that negotiated 2025-03-26; there
// every call passes the per-call limiter in [Server.guard].) The protocol revisions agora
// serves over HTTP (2025-06-18 on) have no batches, so refusing every one loses nothing.
// The SDK's decoder (segmentio/encoding/json) skips exactly RFC 8259's whitespace, so no
// body this check passes can be read as an array.
func peekBatch(w http.ResponseWriter, r *http.Request) (bool, error) {
	if r.Body == nil {
		return false, nil
	}
	br := bufio.NewReaderSize(http.MaxBytesReader(w, r.Body, maxBodyBytes), peekBufferBytes)
	r.Body = readCloser{Reader: br, Closer: r.Body}
	for {
		b, err := br.ReadByte()
		if err == io.EOF {
			return false, nil // empty: the SDK says what is wrong with that
		}
		if err != nil {
			return false, err
		}
		switch b {
		case ' ', '\t', '\r', '\n':
			continue
		}
		br.UnreadByte()
		return b == '[', nil
	}
}

type readCloser struct {
	io.Reader
	io.Closer
}

// refuseRPC refuses a request the way the protocol does: an HTTP status carrying one JSON-RPC
// error object with a null id (the request's ids were never read).
func (g *httpGuard) refuseRPC(w http.ResponseWriter, r *http.Request, status, code int, msg string) {
	g.log.Warn("http request refused", "status", status, "remote", r.RemoteAddr, "reason", msg)
	writeRPCError(w, status, code, msg)
}

// writeRPCError answers status with one JSON-RPC error object of code and msg, id null.
func writeRPCError(w http.ResponseWriter, status, code int, msg string) {
	body, _ := json.Marshal(rpcErrorResponse{JSONRPC: "2.0", Error: rpcErrorObject{Code: code, Message: msg}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(body)
}

type rpcErrorResponse struct {
	JSONRPC string         `json:"jsonrpc"`
	ID      *int           `json:"id"` // always null
	Error   rpcErrorObject `json:"error"`
}

type rpcErrorObject struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}
