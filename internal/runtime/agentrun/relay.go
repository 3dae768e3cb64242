//go:build !agora_worker_exec

package agentrun

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"
)

// relayHeaders are the only request headers the relay passes on (the gateway takes the same
// ones and no others).
var relayHeaders = []string{"Content-Type", "Accept", "Anthropic-Version", "Anthropic-Beta"}

// relay is a loopback TCP listener that forwards Claude Code's API requests to the gateway's
// Unix socket: claude speaks HTTP to a base URL, not to a socket. Inside the sandbox the
// loopback is the sandbox's own; a random per-run token, which claude sends as its bearer
// token (ANTHROPIC_AUTH_TOKEN), keeps any other local process out even without a sandbox.
// The token is no credential upstream: the gateway drops it and adds the real key.
type Relay struct {
	URL   string // http://127.0.0.1:PORT/anthropic, claude's ANTHROPIC_BASE_URL
	Token string

	// allowed reports whether a request path is forwarded.
	allowed func(string) bool
	// first, when set (OnFirst), runs once, at the first request with the token, before
	// the relay forwards it (codex's relay: the token leaves codex's config).
	mu    sync.Mutex
	first func()

	srv *http.Server
	wg  sync.WaitGroup
}

// NewRelayToken returns a fresh relay token: "agora-relay-" and 32 random bytes in hex.
func NewRelayToken() (string, error) {
	tok := make([]byte, 32)
	if _, err := rand.Read(tok); err != nil {
		return "", err
	}
	return "agora-relay-" + hex.EncodeToString(tok), nil
}

// StartRelay listens on 127.0.0.1:0 and forwards the paths allowed admits to requests
// carrying token; modify, when not nil, may replace each response's body.
func StartRelay(gw *Gateway, token, prefix string, allowed func(string) bool, modify func(*http.Response) error) (*Relay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &Relay{
		URL:     "http://" + ln.Addr().String() + strings.TrimSuffix(prefix, "/"),
		Token:   token,
		allowed: allowed,
	}
	target, _ := url.Parse(GatewayBase)
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.URL.Path, pr.Out.URL.RawPath, pr.Out.URL.RawQuery = pr.In.URL.Path, "", ""
			pr.Out.Host = ""
			h := http.Header{}
			for _, k := range relayHeaders {
				if vs := pr.In.Header.Values(k); len(vs) > 0 {
					h[k] = vs
				}
			}
			pr.Out.Header = h
		},
		Transport:      gw.HTTP.Transport,
		ModifyResponse: modify,
		FlushInterval:  -1, // event streams pass as they come
		ErrorLog:       log.New(io.Discard, "", 0),
	}
	r.srv = &http.Server{
		Handler:           r.guard(proxy),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	r.wg.Go(func() { r.srv.Serve(ln) })
	return r, nil
}

// guard admits requests to an allowed path that carry the relay's token.
func (r *Relay) guard(next http.Handler) http.Handler {
	want := []byte("Bearer " + r.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		got := req.Header.Get("Authorization")
		if got == "" {
			got = "Bearer " + req.Header.Get("X-Api-Key")
		}
		switch {
		case subtle.ConstantTimeCompare([]byte(got), want) != 1:
			http.Error(w, `{"type":"error","error":{"type":"authentication_error","message":"agora relay: wrong token"}}`, http.StatusUnauthorized)
		case !r.allowed(req.URL.Path) || strings.Contains(req.URL.Path, ".."):
			http.Error(w, `{"type":"error","error":{"type":"not_found_error","message":"agora relay: no such route"}}`, http.StatusNotFound)
		default:
			// The proxy's transport may still be reading the request body (for its EOF)
			// when the answer's headers go out, and the HTTP/1 server by default consumes
			// and closes an unread body as it writes them: the transport's read then fails
			// and it closes the connection the answer streams on (codex saw the model's
			// answer cut mid-stream; found by the codex learn tests under -race).
			_ = http.NewResponseController(w).EnableFullDuplex()
			r.runFirst()
			next.ServeHTTP(w, req)
		}
	})
}

// OnFirst sets what runs at the first request with the token (see first).
func (r *Relay) OnFirst(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.first = f
}

// runFirst runs first once; a request waits until it has run.
func (r *Relay) runFirst() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.first != nil {
		r.first()
		r.first = nil
	}
}

// close stops the relay and waits for its server.
func (r *Relay) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := r.srv.Shutdown(ctx)
	if err != nil {
		r.srv.Close()
	}
	r.wg.Wait()
	if errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return err
}
