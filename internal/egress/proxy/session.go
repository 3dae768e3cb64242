package proxy

import (
	"bufio"
	"cmp"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/secret/redact"
)

// session forwards the requests of one client connection to one upstream host, reading each:
// a terminated TLS connection, or plain HTTP to one host.
type session struct {
	p        *Proxy
	t        target
	tls      bool
	bound    []Binding        // swapped in: bound to this host and port, on a TLS session only
	named    []Binding        // bound to this host on any port: masked in its responses
	mask     *redact.Redactor // the named values, masked in responses; nil when none
	conn     net.Conn         // upstream, possibly TLS; nil until dialled
	br       *bufio.Reader
	lr       *limitedReader // under br: caps a response head
	cc       *countingConn  // under conn
	up       counter
	down     counter
	keys     map[string]bool
	err      error
	raw      net.Conn // the first upstream connection, dialled by CONNECT
	requests int
	inspect  bool // a rule for the host restricts methods or paths
	// pathRules: a rule for the host limits paths, so a path a server could read otherwise
	// than the proxy is refused (a methods-only rule has no use for the path).
	pathRules bool
	// learn: a learn dispatch may send this host what the grant refuses (it is in
	// LearnHosts); each such request is recorded as net.would_deny before it is sent.
	learn bool
	// would is why the grant would refuse the request judged last, "" when it allows it.
	would string
}

// restricted reports whether a rule for the session's host restricts its requests.
func (s *session) restricted() bool { return s.inspect }

type counter struct{ n atomic.Int64 }

// countingConn counts the bytes read and written on an upstream connection, and ends a read
// that waits longer than idle.
type countingConn struct {
	net.Conn
	up, down *counter
	idle     time.Duration
}

func (c *countingConn) Read(b []byte) (int, error) {
	c.Conn.SetReadDeadline(time.Now().Add(c.idle))
	n, err := c.Conn.Read(b)
	c.down.n.Add(int64(n))
	return n, err
}

func (c *countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.up.n.Add(int64(n))
	return n, err
}

func (p *Proxy) newSession(t target, d decision, useTLS bool, raw net.Conn) *session {
	s := &session{p: p, t: t, tls: useTLS, named: d.named, raw: raw, keys: map[string]bool{}, inspect: d.inspect,
		learn: p.learnHost(t)}
	if useTLS {
		s.bound = d.bound // never swapped into plain HTTP, whatever decided
	}
	for _, r := range p.cfg.Rules {
		if len(r.Paths) > 0 && r.MatchesHost(t.host, t.port) {
			s.pathRules = true
		}
	}
	// A host a secret is bound to may have kept the value from an earlier request and
	// show it on any connection, so every connection to it is masked, whatever its port.
	if len(d.named) > 0 {
		s.mask = p.maskFor(d.named)
	}
	return s
}

// values are the values of the secrets bound to the session's host, on any port.
func (s *session) values() [][]byte {
	out := make([][]byte, len(s.named))
	for i, b := range s.named {
		out[i] = b.Value
	}
	return out
}

func (s *session) usedKeys() []string {
	out := make([]string, 0, len(s.keys))
	for k := range s.keys {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// serveTLS terminates the client's TLS with a certificate for the target from the dispatch's
// CA and forwards each request it reads.
func (s *session) serveTLS(c net.Conn, br *bufio.Reader) {
	cert, err := s.p.cfg.CA.certFor(s.t.host)
	if err != nil {
		s.err = err
		return
	}
	tc := tls.Server(&prefixConn{Conn: c, r: br}, &tls.Config{
		Certificates: []tls.Certificate{*cert},
		NextProtos:   []string{"http/1.1"},
		MinVersion:   tls.VersionTLS12,
	})
	tc.SetDeadline(time.Now().Add(headTimeout))
	if err := tc.Handshake(); err != nil {
		s.err = fmt.Errorf("TLS handshake with the sandbox: %w", err)
		return
	}
	tc.SetDeadline(time.Time{})
	defer s.closeUpstream()
	lr := &limitedReader{r: tc}
	cbr := bufio.NewReaderSize(lr, 16<<10)
	for {
		tc.SetReadDeadline(time.Now().Add(s.p.idle()))
		lr.left = maxHead
		req, err := http.ReadRequest(cbr)
		lr.left = math.MaxInt64
		if err != nil {
			if errors.Is(err, errHeadTooLarge) {
				s.p.writeStatus(tc, http.StatusRequestHeaderFieldsTooLarge, fmt.Sprintf("agora egress proxy: request head too large (over %d KiB).", maxHead>>10))
			} else if !errors.Is(err, io.EOF) && !isClosed(err) && !isTimeout(err) {
				s.p.writeStatus(tc, http.StatusBadRequest, "agora egress proxy: malformed request: "+s.p.shortError(err)+".")
			}
			return
		}
		tc.SetReadDeadline(time.Time{})
		if !s.forward(tc, cbr, req) {
			return
		}
	}
}

// defaultIdleTimeout ends a connection that moved no byte for this long.
const defaultIdleTimeout = 5 * time.Minute

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// forward checks one request, swaps the bound secrets in, sends it upstream and copies the
// response back, masked. It reports whether the client connection may carry another request.
func (s *session) forward(w net.Conn, cr *bufio.Reader, req *http.Request) bool {
	if reason := s.judge(req); reason != "" {
		s.refuseRequest(w, req, reason)
		return false // the refusal closes the exchange
	}
	s.swap(req)
	if strings.EqualFold(req.Header.Get("Expect"), "100-continue") {
		// Answered here, and not sent on: the client sends its body now, and the host never
		// answers with an interim response the exchange below would take for the final one.
		io.WriteString(w, "HTTP/1.1 100 Continue\r\n\r\n")
		req.Header.Del("Expect")
	}
	out := outgoing(req, s.t, s.tls, s.mask != nil)
	if s.conn != nil && s.stale() {
		s.closeUpstream() // closed by the host while idle: nothing was sent on it
	}
	if s.conn == nil {
		if err := s.dialUpstream(); err != nil {
			s.err = err
			s.p.writeStatus(w, http.StatusBadGateway, "agora egress proxy: "+s.p.shortError(err)+".")
			return false
		}
	}
	if s.would != "" {
		// A learn dispatch's request the grant refuses: recorded before it is sent, once its
		// connection is up (a dial the egress policy refuses sends nothing, so learns nothing:
		// a would_deny is evidence `agora capability suggest` proposes from).
		path, _ := requestPath(req)
		if err := s.p.wouldDeny(s.t, "request", req.Method, path, s.would); err != nil {
			s.p.writeStatus(w, http.StatusServiceUnavailable, "agora egress proxy: the request could not be audited, so it was not sent.")
			return false
		}
	}
	// Sent once: a failure is the client's to retry, never the proxy's (the host may have
	// acted on a request whose connection broke).
	if err := out.Write(s.conn); err != nil {
		s.closeUpstream()
		s.err = err
		s.p.writeStatus(w, http.StatusBadGateway, "agora egress proxy: sending to "+s.t.String()+" failed; the request was not resent.")
		return false
	}
	stop := s.watchClient(w, cr)
	defer stop()
	s.lr.left = maxRespHead
	resp, err := readFinalResponse(s.br, out)
	if s.lr != nil {
		s.lr.left = math.MaxInt64
	}
	if err != nil {
		s.err = err
		s.closeUpstream()
		if errors.Is(err, errHeadTooLarge) {
			s.p.writeStatus(w, http.StatusBadGateway, fmt.Sprintf("agora egress proxy: the response head from %s is too large (over %d KiB); refused.", s.t, maxRespHead>>10))
			return false
		}
		s.p.writeStatus(w, http.StatusBadGateway, "agora egress proxy: no valid response from "+s.t.String()+".")
		return false
	}
	s.requests++
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusSwitchingProtocols {
		// The proxy relays HTTP exchanges it reads, never a raw protocol after a switch: what
		// follows a 101 would go unread and unaudited, or be taken for the next answer.
		s.closeUpstream()
		s.p.writeStatus(w, http.StatusBadGateway, "agora egress proxy: "+s.t.String()+" answered 101 Switching Protocols; protocol upgrades are not supported through the proxy, so the connection is closed.")
		return false
	}
	if s.mask != nil {
		if ce := resp.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
			s.closeUpstream()
			s.p.writeStatus(w, http.StatusBadGateway, "agora egress proxy: "+s.t.String()+" answered with Content-Encoding "+cut(s.p.scrub(ce), 32)+", which would hide a secret from masking; refused.")
			return false
		}
		maskResponse(resp, s.mask, s.values())
	}
	removeHopHeaders(resp.Header)
	if err := resp.Write(w); err != nil {
		s.err = err
		return false
	}
	if resp.Close || out.Close {
		s.closeUpstream()
	}
	return !req.Close && !resp.Close
}

// judge returns why req may not go to the session's host, or "". On a learn session, a
// refusal of the grant's (its methods and paths) is kept in s.would instead: the request goes,
// recorded as net.would_deny. What the grant does not decide (a CONNECT inside, another Host,
// an upgrade, a placeholder on the wrong host) stays refused.
func (s *session) judge(req *http.Request) string {
	s.would = ""
	reason := s.check(req)
	if reason == "" || !s.learn {
		return reason
	}
	if outside := s.checkOutsideGrant(req); outside != "" {
		return outside
	}
	// Learn relaxes no secret: a bound secret is swapped in only on a request the grant
	// allows, so one the grant refuses that carries its placeholder is refused, not learned.
	for i, b := range s.p.cfg.Bindings {
		if s.isBound(b) && containsPlaceholder(req, s.p.finders[i]) {
			return "it carries the placeholder of " + b.Key + ", and a learn dispatch's secret is swapped in only on a request its grant allows; this one it would refuse (" + reason + ")"
		}
	}
	s.would = reason
	return ""
}

// checkOutsideGrant is what check refuses whatever the grant says.
func (s *session) checkOutsideGrant(req *http.Request) string {
	if req.Method == http.MethodConnect {
		return "a CONNECT inside a connection is not allowed"
	}
	if h := req.Host; h != "" && s.tls {
		t, err := parseAuthority(h, s.t.port)
		if err != nil || t != s.t {
			return "its Host header names another host than the connection's"
		}
	}
	if up := req.Header.Get("Upgrade"); up != "" {
		return "protocol upgrades are not supported"
	}
	for i, b := range s.p.cfg.Bindings {
		if !s.isBound(b) && containsPlaceholder(req, s.p.finders[i]) {
			return s.placeholderRefusal(i, b)
		}
	}
	return ""
}

// check returns why req may not go to the session's host, or "".
func (s *session) check(req *http.Request) string {
	if req.Method == http.MethodConnect {
		return "a CONNECT inside a connection is not allowed"
	}
	if h := req.Host; h != "" && s.tls {
		t, err := parseAuthority(h, s.t.port)
		if err != nil || t != s.t {
			return "its Host header names another host than the connection's"
		}
	}
	if up := req.Header.Get("Upgrade"); up != "" {
		return "protocol upgrades are not supported"
	}
	path, problem := requestPath(req)
	if problem != "" && s.pathRules {
		return problem
	}
	if s.pathRules && grant.DotOrEmptySegment(path) {
		return `its path holds a "." or ".." segment or an empty one ("//"), which servers resolve differently`
	}
	if strings.Contains(path, "#") && s.pathRules {
		return "its path holds a \"#\", which servers read differently"
	}
	if !grant.RequestAllowed(s.p.cfg.Rules, s.t.host, s.t.port, req.Method, path) {
		return "the grant does not allow " + cut(req.Method, 16) + " " + cut(path, 200) + " on this host"
	}
	if s.restricted() {
		for _, m := range overrideMethods(req) {
			if !grant.RequestAllowed(s.p.cfg.Rules, s.t.host, s.t.port, m, path) {
				return "it asks for " + cut(m, 16) + " in a method override, which the grant does not allow"
			}
		}
	}
	for i, b := range s.p.cfg.Bindings {
		if !s.isBound(b) && containsPlaceholder(req, s.p.finders[i]) {
			return s.placeholderRefusal(i, b)
		}
	}
	return ""
}

// placeholderRefusal says why the placeholder of binding i may not go on this session.
func (s *session) placeholderRefusal(i int, b Binding) string {
	named := false
	for _, x := range s.named {
		named = named || x.Placeholder == b.Placeholder
	}
	switch {
	case !named:
		return "it carries the placeholder of " + b.Key + ", which is not bound to this host"
	case !s.tls:
		return "it carries the placeholder of " + b.Key + ", which agora swaps only inside HTTPS (bound to " + s.p.boundWhere(i) +
			"); over plain HTTP the secret would cross the network in cleartext"
	default:
		return "it carries the placeholder of " + b.Key + ", which is bound to " + s.p.boundWhere(i) + ", not to port " +
			strconv.Itoa(int(s.t.port)) + " of this host"
	}
}

// overrideHeaders carry a method that frameworks use instead of the request's own.
var overrideHeaders = []string{"X-Http-Method-Override", "X-Http-Method", "X-Method-Override"}

// overrideMethods are the methods req asks for besides its own: the override headers and a
// "_method" query parameter (a form body's "_method" is not read; see docs/egress.md).
func overrideMethods(req *http.Request) []string {
	var out []string
	for _, h := range overrideHeaders {
		for _, v := range req.Header.Values(h) {
			for _, m := range strings.Split(v, ",") {
				out = append(out, strings.ToUpper(strings.TrimSpace(m)))
			}
		}
	}
	for _, m := range req.URL.Query()["_method"] {
		out = append(out, strings.ToUpper(strings.TrimSpace(m)))
	}
	return out
}

func (s *session) isBound(b Binding) bool {
	for _, x := range s.bound {
		if x.Placeholder == b.Placeholder {
			return true
		}
	}
	return false
}

// requestPath is the request's decoded path, as a server sees it, and "" or why the proxy
// will not judge it: an escaped path that encodes "/", "\\", ".", "%" (a second round of
// decoding) or a control byte, which servers and the rule matcher may read differently.
func requestPath(req *http.Request) (path, problem string) {
	esc := req.URL.EscapedPath()
	for i := 0; i+2 < len(esc); i++ {
		if esc[i] != '%' {
			continue
		}
		code := strings.ToLower(esc[i+1 : i+3])
		switch {
		case code == "2f", code == "5c", code == "2e", code == "25":
			return "", fmt.Sprintf("its path holds %q (an encoded %q), which servers decode differently; send the path decoded",
				code2escape(code), unescapeByte(code))
		case code < "20" || code == "7f":
			return "", "its path holds an encoded control character"
		}
	}
	p := cmp.Or(req.URL.Path, "/")
	return p, ""
}

func code2escape(code string) string { return "%" + code }

func unescapeByte(code string) string {
	switch code {
	case "2f":
		return "/"
	case "5c":
		return "\\"
	case "2e":
		return "."
	}
	return "%"
}

func (s *session) refuseRequest(w io.Writer, req *http.Request, reason string) {
	path := req.URL.Path
	s.p.count(s.t, false, 0, 0)
	s.p.record(s.p.ctx, entry.NetRequest, map[string]any{
		entry.KeyHost: s.t.host, entry.KeyPort: int(s.t.port), entry.KeyMethod: cut(req.Method, 16), entry.KeyPath: cut(path, 200),
		entry.KeyDecision: "deny", entry.KeyReason: reason,
	})
	sentence := fmt.Sprintf("agora refused %s %s on %s: %s; this sandbox can make only the requests its grant allows.",
		cut(req.Method, 16), cut(path, 200), s.t.String(), reason)
	s.p.notice(sentence)
	s.p.writeStatus(w, http.StatusForbidden, sentence)
}

// dialUpstream connects (again) to the host: the CONNECT's first connection, else a new one
// through the egress dialer; TLS with normal verification when the session is terminated.
func (s *session) dialUpstream() error {
	raw := s.raw
	s.raw = nil
	if raw == nil {
		c, refused, err := s.p.dial(s.p.ctx, s.t)
		if refused != "" {
			return errors.New("refused " + s.t.String() + ": " + refused)
		}
		if err != nil {
			return fmt.Errorf("could not connect to %s: %w", s.t, err)
		}
		raw = c
	}
	s.cc = &countingConn{Conn: raw, up: &s.up, down: &s.down, idle: s.p.idle()}
	var c net.Conn = s.cc
	if s.tls {
		tc := tls.Client(c, &tls.Config{
			ServerName: s.t.host,
			RootCAs:    s.p.cfg.Roots,
			NextProtos: []string{"http/1.1"},
			MinVersion: tls.VersionTLS12,
		})
		tc.SetDeadline(time.Now().Add(headTimeout))
		if err := tc.Handshake(); err != nil {
			raw.Close()
			return fmt.Errorf("TLS to %s failed: %s", s.t, s.p.shortError(err))
		}
		tc.SetDeadline(time.Time{})
		c = tc
	}
	s.lr = &limitedReader{r: c, left: math.MaxInt64}
	s.conn, s.br = c, bufio.NewReaderSize(s.lr, 16<<10)
	return nil
}

// stale reports whether the kept-alive upstream connection is unusable: the host closed it,
// or sent bytes nobody asked for. It looks without reading or waiting.
func (s *session) stale() bool {
	return s.br.Buffered() > 0 || peerClosedOrSent(s.cc.Conn)
}

// watchClient ends the exchange when the client goes away while it waits on the host: a
// background peek at the client's next bytes; the client's end (or an error) closes the
// upstream connection, which ends the wait. stop wakes the peek and waits for it; nothing
// is consumed, so a pipelined next request stays for the next read.
func (s *session) watchClient(c net.Conn, br *bufio.Reader) (stop func()) {
	up := s.cc.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := br.Peek(1); err != nil && !isTimeout(err) {
			up.Close()
		}
	}()
	return func() {
		c.SetReadDeadline(time.Now())
		<-done
		c.SetReadDeadline(time.Time{})
	}
}

func (s *session) closeUpstream() {
	if s.conn != nil {
		s.conn.Close()
		s.conn, s.br, s.lr = nil, nil, nil
	}
	if s.raw != nil {
		s.raw.Close()
		s.raw = nil
	}
}

// outgoing is the request sent upstream: origin-form, hop-by-hop and proxy headers removed,
// and plain bodies asked for when the response will be masked.
func outgoing(req *http.Request, t target, useTLS, masked bool) *http.Request {
	out := req.Clone(req.Context())
	out.Body = req.Body
	if req.Body == http.NoBody || req.ContentLength == 0 && len(req.TransferEncoding) == 0 {
		out.Body = nil
	}
	out.RequestURI = ""
	out.URL.Scheme, out.URL.Host = "", ""
	if useTLS {
		out.URL.Scheme = "https"
	} else {
		out.URL.Scheme = "http"
	}
	out.URL.Host = t.String()
	if out.Host == "" {
		out.Host = hostHeader(t, useTLS)
	}
	removeHopHeaders(out.Header)
	if masked {
		out.Header.Set("Accept-Encoding", "identity")
	}
	return out
}

func hostHeader(t target, useTLS bool) string {
	if (useTLS && t.port == 443) || (!useTLS && t.port == 80) {
		if strings.Contains(t.host, ":") {
			return "[" + t.host + "]"
		}
		return t.host
	}
	return t.String()
}

// hopHeaders are never forwarded (RFC 9110 7.6.1), nor the proxy's own.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Upgrade"}

func removeHopHeaders(h http.Header) {
	for _, f := range h.Values("Connection") {
		for _, name := range strings.Split(f, ",") {
			if name = strings.TrimSpace(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
}

// writeStatus is [writeStatus] with every bound value masked in body: a sentence may quote
// what a host sent.
func (p *Proxy) writeStatus(w io.Writer, status int, body string) {
	writeStatus(w, status, p.scrub(body))
}

// writeStatus answers a request with status and a one-line text body, closing the exchange.
func writeStatus(w io.Writer, status int, body string) {
	body += "\n"
	fmt.Fprintf(w, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %s\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), strconv.Itoa(len(body)), body)
}

func writeAuthRequired(w io.Writer) {
	body := "agora egress proxy: proxy authorization required.\n"
	fmt.Fprintf(w, "HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"agora\"\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}

// prefixConn reads what a bufio.Reader already holds before the connection itself.
type prefixConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *prefixConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// readFinalResponse reads the host's answer to req, skipping interim (1xx) responses: the
// proxy answers a client's Expect itself; a 101 comes back, for the caller to refuse.
func readFinalResponse(br *bufio.Reader, req *http.Request) (*http.Response, error) {
	for range 8 {
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			return resp, nil
		}
		resp.Body.Close()
	}
	return nil, errors.New("more than 8 interim responses")
}
