package proxy

import (
	"bufio"
	"context"
	"crypto/subtle"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agora-dev/agora/internal/egress"
	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/secret/redact"
)

// Auditor records the proxy's decisions. Record returns only once the entry is kept (or
// failed); a failed record refuses the connection or request it was about.
type Auditor interface {
	Record(ctx context.Context, kind string, details map[string]any) error
}

// Binding is one secret bound to hosts: the sandbox holds Placeholder, the proxy sends Value
// to the bound hosts only, and only inside TLS it terminates and re-encrypts (never over
// plain HTTP).
type Binding struct {
	Key         string // the env bundle key, for the audit (never the value)
	Placeholder string
	Value       []byte
	// Hosts are where Value may go, as a binding stores them ([grant.ParseBoundHost]): a host
	// pattern as in a grant (name, "*.domain" or IP literal) and a port, 443 when none is
	// written.
	Hosts   []string
	Headers []string // header names swapped besides Authorization
}

// Config is one dispatch's proxy.
type Config struct {
	// Rules is the dispatch's effective egress grant.
	Rules []grant.EgressRule
	// Learn makes the proxy a learn dispatch's (docs/learn.md): a connection or request the
	// Rules refuse, to a host LearnHosts allow, is let through and recorded first as
	// net.would_deny (with method and path where the proxy reads the request: it terminates
	// TLS to such a host when it has a CA). Every other refusal stands, recorded as without
	// Learn. Without Learn, LearnHosts are ignored.
	Learn      bool
	LearnHosts []grant.EgressRule
	// Dialer dials every upstream connection. Required.
	Dialer *egress.Dialer
	// Token, when set, must be the password of the client's Proxy-Authorization (Basic,
	// any user name): the proxy is then safe on a loopback others share (sandbox: none).
	Token string
	// CA signs the certificates of hosts the proxy terminates TLS for. nil refuses every
	// connection that needs termination.
	CA *CA
	// Roots verifies upstream servers when the proxy terminates TLS; nil means the system's.
	Roots *x509.CertPool
	// Bindings are the dispatch's bound secrets.
	Bindings []Binding
	// Audit receives net.connect, net.request and net.close entries. Required.
	Audit Auditor
	// MaxConns caps concurrent client connections (default 512); more wait.
	MaxConns int
	// IdleTimeout ends a connection that moved no byte either way for this long (default 5
	// minutes): a tunnel, a terminated session waiting on its host or on the next request,
	// a plain connection between requests.
	IdleTimeout time.Duration
	// MaxAuditEntries caps the entries one dispatch's proxy writes (default 20,000). When it
	// is spent every further connection is refused without an entry, and OnLimit is called
	// once.
	MaxAuditEntries int
	// OnLimit is called (once) when the audit budget is spent.
	OnLimit func(detail string)
	// Notice, when set, receives one line for each refusal (for the dispatch's stderr: a
	// client such as git shows only "CONNECT tunnel failed, response 403").
	Notice func(line string)

	// linger bounds how long a tunnel's other direction may stay silent once one direction
	// has ended (default closeLinger); tests shorten it.
	linger time.Duration
}

// Defaults.
const (
	defaultMaxConns        = 512
	defaultMaxAuditEntries = 20000
	// headTimeout bounds reading one request head from the client.
	headTimeout = 30 * time.Second
	// maxHead caps one request head from the client.
	maxHead = 64 << 10
	// maxRespHead caps one response head from a host the proxy reads.
	maxRespHead = 256 << 10
	// maxAuthTries is how many 407 answers one client connection gets.
	maxAuthTries = 3
)

// Proxy serves one dispatch. Build it with [New]; [Proxy.Serve] accepts on a listener.
type Proxy struct {
	cfg   Config
	conns chan struct{} // semaphore of MaxConns

	mu      sync.Mutex
	active  map[net.Conn]struct{}
	stopped bool
	stats   Stats
	spent   bool
	entries int
	wg      sync.WaitGroup
	ctx     context.Context
	cancel  context.CancelFunc
	// scrubber masks every bound value in the proxy's own messages and entries; nil when
	// nothing is bound.
	scrubber *redact.Redactor
	// finders find each binding's placeholder (by index in cfg.Bindings) in a request.
	finders []*placeholderFinder
	// hosts are each binding's hosts (by index in cfg.Bindings), parsed: never port 0.
	hosts [][]grant.EgressRule
	// masks are the strict redactors of the sets of bindings connections have named, by
	// their placeholders: built once per set, not per connection. Guarded by mu.
	masks map[string]*redact.Redactor
}

// Stats counts what a dispatch's proxy did, for its record.
type Stats struct {
	// Reached counts allowed connections by "host:port"; Refused refused connections and
	// requests by "host:port".
	Reached map[string]int `json:"reached,omitempty"`
	Refused map[string]int `json:"refused,omitempty"`
	// BytesUp and BytesDown are the bytes relayed to and from upstream hosts.
	BytesUp   int64 `json:"bytes_up"`
	BytesDown int64 `json:"bytes_down"`
}

// New returns a proxy for cfg.
func New(cfg Config) (*Proxy, error) {
	if cfg.Dialer == nil || cfg.Audit == nil {
		return nil, errors.New("egress proxy: a dialer and an auditor are required")
	}
	for _, b := range cfg.Bindings {
		if len(b.Value) < redact.MinLen {
			return nil, fmt.Errorf("egress proxy: the secret %q is bound to hosts but is shorter than %d bytes, too short to mask in what a host sends back; bind a real credential", cut(b.Key, 64), redact.MinLen)
		}
		if len(b.Placeholder) < 16 {
			return nil, fmt.Errorf("egress proxy: the secret %q has no placeholder of at least 16 bytes", cut(b.Key, 64))
		}
		if len(b.Hosts) == 0 {
			return nil, fmt.Errorf("egress proxy: the secret %q is bound to no host", cut(b.Key, 64))
		}
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = defaultMaxConns
	}
	if cfg.MaxAuditEntries <= 0 {
		cfg.MaxAuditEntries = defaultMaxAuditEntries
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{
		cfg: cfg, conns: make(chan struct{}, cfg.MaxConns), active: map[net.Conn]struct{}{},
		stats: Stats{Reached: map[string]int{}, Refused: map[string]int{}}, ctx: ctx, cancel: cancel,
	}
	if len(cfg.Bindings) > 0 {
		vals := make([][]byte, len(cfg.Bindings))
		for i, b := range cfg.Bindings {
			vals[i] = b.Value
		}
		p.scrubber = redact.NewStrict(vals)
	}
	for _, b := range cfg.Bindings {
		p.finders = append(p.finders, newPlaceholderFinder(b.Placeholder))
		hosts := make([]grant.EgressRule, 0, len(b.Hosts))
		for _, h := range b.Hosts {
			r, err := grant.ParseBoundHost(h)
			if err != nil {
				cancel()
				return nil, fmt.Errorf("egress proxy: the secret %q: %w", cut(b.Key, 64), err)
			}
			hosts = append(hosts, r)
		}
		p.hosts = append(p.hosts, hosts)
	}
	return p, nil
}

// maskFor returns the strict redactor of the values of bindings (a host's named ones), which
// masks them in what the host sends back: every encoding and every piece long enough to
// matter ([redact.NewStrict]).
func (p *Proxy) maskFor(bindings []Binding) *redact.Redactor {
	var key strings.Builder
	vals := make([][]byte, len(bindings))
	for i, b := range bindings {
		key.WriteString(b.Placeholder + "\x00")
		vals[i] = b.Value
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if r, ok := p.masks[key.String()]; ok {
		return r
	}
	if p.masks == nil {
		p.masks = map[string]*redact.Redactor{}
	}
	r := redact.NewStrict(vals)
	p.masks[key.String()] = r
	return r
}

// Serve accepts client connections on ln until [Proxy.Close] or ln fails.
func (p *Proxy) Serve(ln net.Listener) error {
	go func() {
		<-p.ctx.Done()
		ln.Close()
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			if p.ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return err
		}
		select {
		case p.conns <- struct{}{}:
		case <-p.ctx.Done():
			c.Close()
			return nil
		}
		if !p.track(c) {
			c.Close()
			<-p.conns
			return nil
		}
		p.wg.Go(func() {
			defer func() { <-p.conns }()
			defer p.untrack(c)
			p.serveConn(c)
		})
	}
}

// Close stops accepting, closes every connection and waits for their handlers (so every
// net.close entry is written). It is safe to call more than once.
func (p *Proxy) Close() error {
	p.cancel()
	p.mu.Lock()
	p.stopped = true
	conns := slices.Collect(maps.Keys(p.active))
	p.mu.Unlock()
	// Upstream connections too: a handler blocked reading a silent host must end now.
	for _, c := range conns {
		c.Close()
	}
	p.wg.Wait()
	return nil
}

// Stats returns a copy of the counts so far.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := Stats{Reached: map[string]int{}, Refused: map[string]int{}, BytesUp: p.stats.BytesUp, BytesDown: p.stats.BytesDown}
	for k, v := range p.stats.Reached {
		s.Reached[k] = v
	}
	for k, v := range p.stats.Refused {
		s.Refused[k] = v
	}
	return s
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return false
	}
	p.active[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	c.Close()
	p.mu.Lock()
	delete(p.active, c)
	p.mu.Unlock()
}

// trackedConn is an upstream connection [Proxy.Close] closes; closing it forgets it.
type trackedConn struct {
	net.Conn
	p    *Proxy
	once sync.Once
}

func (t *trackedConn) Close() error {
	t.once.Do(func() {
		t.p.mu.Lock()
		delete(t.p.active, t)
		t.p.mu.Unlock()
	})
	return t.Conn.Close()
}

// CloseWrite half-closes the connection when it can.
func (t *trackedConn) CloseWrite() error {
	if cw, ok := t.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return t.Conn.Close()
}

// trackUpstream registers an upstream connection; after Close it is closed and refused.
func (p *Proxy) trackUpstream(c net.Conn) (net.Conn, error) {
	tc := &trackedConn{Conn: c, p: p}
	if !p.track(tc) {
		c.Close()
		return nil, errors.New("the dispatch's proxy is closing")
	}
	return tc, nil
}

// limitedConn caps what a request head may read; reset before each head, lifted after.
type limitedConn struct {
	net.Conn
	left int64
}

func (l *limitedConn) Read(b []byte) (int, error) { return limitRead(l.Conn, &l.left, b) }

// limitedReader is a limitedConn for any reader: a terminated TLS session, an upstream.
type limitedReader struct {
	r    io.Reader
	left int64
}

func (l *limitedReader) Read(b []byte) (int, error) { return limitRead(l.r, &l.left, b) }

func limitRead(r io.Reader, left *int64, b []byte) (int, error) {
	if *left <= 0 {
		return 0, errHeadTooLarge
	}
	if int64(len(b)) > *left {
		b = b[:*left]
	}
	n, err := r.Read(b)
	*left -= int64(n)
	return n, err
}

var errHeadTooLarge = errors.New("head too large")

// client is one client connection and the reader of its requests.
type client struct {
	net.Conn
	lc *limitedConn
	br *bufio.Reader
}

func newClient(c net.Conn) *client {
	lc := &limitedConn{Conn: c}
	return &client{Conn: c, lc: lc, br: bufio.NewReaderSize(lc, 16<<10)}
}

// readRequest reads one request head, capped at maxHead and bounded by timeout; the body
// (and a tunnel after a CONNECT) is then read without the cap.
func (cl *client) readRequest(timeout time.Duration) (*http.Request, error) {
	cl.lc.left = maxHead
	cl.SetReadDeadline(time.Now().Add(timeout))
	req, err := http.ReadRequest(cl.br)
	cl.SetReadDeadline(time.Time{})
	cl.lc.left = math.MaxInt64
	return req, err
}

// serveConn reads requests from one client connection: a CONNECT hands the connection to a
// tunnel; plain requests are forwarded while the client keeps the connection.
func (p *Proxy) serveConn(c net.Conn) {
	cl := newClient(c)
	authTries := 0
	for {
		req, err := cl.readRequest(headTimeout)
		if err != nil {
			if !errors.Is(err, io.EOF) && !isClosed(err) && !isTimeout(err) {
				status := http.StatusBadRequest
				if errors.Is(err, errHeadTooLarge) {
					status = http.StatusRequestHeaderFieldsTooLarge
				}
				p.writeStatus(c, status, "agora egress proxy: malformed request: "+p.shortError(err)+".")
			}
			return
		}
		if !p.authorized(req) {
			authTries++
			io.Copy(io.Discard, io.LimitReader(req.Body, 1<<20))
			writeAuthRequired(c)
			if authTries >= maxAuthTries || req.Close {
				return
			}
			continue
		}
		if req.Method == http.MethodConnect {
			p.connect(cl, req)
			return
		}
		if !p.plain(cl, req) {
			return
		}
	}
}

// authorized checks the Proxy-Authorization header when a token is configured.
func (p *Proxy) authorized(req *http.Request) bool {
	defer req.Header.Del("Proxy-Authorization")
	if p.cfg.Token == "" {
		return true
	}
	h := req.Header.Get("Proxy-Authorization")
	scheme, cred, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return false
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
	if err != nil {
		return false
	}
	_, pass, ok := strings.Cut(string(raw), ":")
	return ok && subtle.ConstantTimeCompare([]byte(pass), []byte(p.cfg.Token)) == 1
}

func isClosed(err error) bool {
	return errors.Is(err, net.ErrClosed) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, context.Canceled)
}

// shortError is err's text with every bound value masked, then cut: masked before the cut,
// so no part of a value survives at the edge.
func (p *Proxy) shortError(err error) string {
	return shortError(errors.New(p.scrub(err.Error())))
}

// shortError is err's text, cut, without anything that could be long.
func shortError(err error) string {
	s := err.Error()
	s = s[:min(len(s), 200)]
	return strings.ToValidUTF8(s, "?")
}
