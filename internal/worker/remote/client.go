// Package remote is the worker's side of agora's network gateway, for a worker that runs
// where the host's file system is not (a Kubernetes pod): the init step that fetches the
// mounts ([FetchMain], `agora worker fetch`) and, in the worker itself ([Start]), the token
// taken out of the environment, the host's sockets served by tunnels, the secrets object read
// through the gateway, the output streamed back and the result uploaded.
//
// It runs INSIDE the pod, next to the agent: it links only the standard library, the
// contract (internal/compute/remote) and the sandbox layout (internal/worker/wire). Every
// decision stays with the host; this package moves bytes and trusts only the CA it is given.
package remote

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/agora-dev/agora/internal/compute/remote"
)

// Limits of the client.
const (
	// maxInfo caps GET session's reply.
	maxInfo = 1 << 20
	// maxErrorBody caps an error reply read into a message.
	maxErrorBody = 512
	// dialTimeout bounds connecting to the gateway.
	dialTimeout = 15 * time.Second
)

// Client talks to the gateway for one dispatch. The token lives only in its memory.
type Client struct {
	base     *url.URL
	dispatch string
	token    string
	tls      *tls.Config
	http     *http.Client
	// socket is the Unix socket the gateway is reached through; "" dials base's host.
	socket string
	// log is where the retries across a gateway's outage are noted (the container's own
	// stderr, which `kubectl logs` reads); nil notes nothing. Set before any request.
	log io.Writer
}

// FromEnv builds a client from the pod's environment ([remote.GatewayURLEnv],
// [remote.TokenEnv], [remote.CAEnv]) and removes those variables and [remote.StageEnv] from
// the process's environment first, so nothing it starts inherits the token. dispatch is the
// dispatch id (AGORA_DISPATCH_ID).
func FromEnv(dispatch string) (*Client, error) {
	u, token, ca := os.Getenv(remote.GatewayURLEnv), os.Getenv(remote.TokenEnv), os.Getenv(remote.CAEnv)
	for _, k := range []string{remote.GatewayURLEnv, remote.TokenEnv, remote.CAEnv} {
		os.Unsetenv(k)
	}
	return NewClient(u, dispatch, token, []byte(ca))
}

// NewClient returns a client of the gateway at rawURL ("https://HOST:PORT") trusting only the
// certificates in caPEM.
func NewClient(rawURL, dispatch, token string, caPEM []byte) (*Client, error) {
	return NewSocketClient(rawURL, "", dispatch, token, caPEM)
}

// NewSocketClient is [NewClient] reaching the gateway through the Unix socket at socket
// ([remote.GatewaySocketEnv]: a docker warm slot, which has no network) when socket is not
// empty. TLS is unchanged: the certificate must still be the CA's for rawURL's host.
func NewSocketClient(rawURL, socket, dispatch, token string, caPEM []byte) (*Client, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "https" || u.Host == "" || (u.Path != "" && u.Path != "/") || u.User != nil || u.RawQuery != "" {
		return nil, fmt.Errorf("gateway URL %q: want https://HOST:PORT", rawURL)
	}
	if dispatch == "" || strings.ContainsAny(dispatch, "/?#%") {
		return nil, fmt.Errorf("dispatch id %q is not valid", dispatch)
	}
	if token == "" {
		return nil, fmt.Errorf("no gateway token in %s", remote.TokenEnv)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("no PEM certificate in %s", remote.CAEnv)
	}
	cfg := &tls.Config{
		MinVersion:         tls.VersionTLS13,
		RootCAs:            pool,
		ServerName:         u.Hostname(),
		NextProtos:         []string{"http/1.1"},
		ClientSessionCache: tls.NewLRUClientSessionCache(64),
	}
	tr := &http.Transport{
		TLSClientConfig:     cfg,
		TLSHandshakeTimeout: dialTimeout,
		DialContext:         dialer(socket),
		DisableCompression:  true,
		MaxIdleConnsPerHost: 8,
		IdleConnTimeout:     30 * time.Second,
		Proxy:               nil, // the gateway is reached directly, never through a proxy
		TLSNextProto:        map[string]func(string, *tls.Conn) http.RoundTripper{},
		// Large buffers: a bundle download is the bulk of a pod's start.
		ReadBufferSize:  256 << 10,
		WriteBufferSize: 256 << 10,
	}
	return &Client{base: &url.URL{Scheme: "https", Host: u.Host}, dispatch: dispatch, token: token, tls: cfg, http: &http.Client{Transport: tr}, socket: socket}, nil
}

// dialer dials the gateway's host, or the Unix socket at socket whatever address is asked.
func dialer(socket string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: dialTimeout}
	if socket == "" {
		return d.DialContext
	}
	return func(ctx context.Context, _, _ string) (net.Conn, error) {
		return d.DialContext(ctx, "unix", socket)
	}
}

// Close releases idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

func (c *Client) url(route string) string {
	return c.base.String() + remote.RoutePrefix + c.dispatch + "/" + route
}

// do sends a request with the token and returns the response when its status is want.
// newBody (nil for none) makes the request's body afresh for each attempt. A request that
// gets no answer, or a "not now" (retry.go), is tried again across a gateway's outage: every
// route is safe to repeat (a GET serves the same again; a once-only file is still there when
// nothing was answered; an upload of the same bytes is answered 204 again). A stream's POST
// is not a request of this kind: see stream.go.
func (c *Client) do(ctx context.Context, method, route string, newBody func() io.ReadCloser, want int) (*http.Response, error) {
	return c.doRetrier(ctx, c.retry(method+" "+route), method, route, newBody, want)
}

// doRetrier is do with the caller's retrier, which notes whether an attempt went unanswered.
func (c *Client) doRetrier(ctx context.Context, r *retrier, method, route string, newBody func() io.ReadCloser, want int) (*http.Response, error) {
	for {
		var body io.ReadCloser
		if newBody != nil {
			body = newBody()
		}
		resp, err := c.once(ctx, method, route, body)
		if err == nil && resp.StatusCode == want {
			r.recovered()
			return resp, nil
		}
		if err != nil {
			r.unanswered = true
		}
		if err == nil {
			err = statusError(method, route, resp)
			resp.Body.Close()
			if !transientStatus(resp.StatusCode) {
				return nil, err
			}
		} else if !transient(ctx, err) {
			// url.Error quotes the URL, which holds no token.
			return nil, fmt.Errorf("%s %s: %w", method, route, err)
		}
		if werr := r.wait(ctx, err); werr != nil {
			return nil, werr
		}
	}
}

// once sends one request with the token.
func (c *Client) once(ctx context.Context, method, route string, body io.ReadCloser) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.url(route), body)
	if err != nil {
		if body != nil {
			body.Close()
		}
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	return c.http.Do(req)
}

func statusError(method, route string, resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	msg := strings.TrimSpace(strings.ToValidUTF8(string(b), ""))
	return &StatusError{Method: method, Route: route, Code: resp.StatusCode, Message: msg}
}

// StatusError is a reply of the gateway with an unexpected status.
type StatusError struct {
	Method, Route string
	Code          int
	Message       string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s %s: the gateway answered %d: %s", e.Method, e.Route, e.Code, e.Message)
}

// Info returns the session.
func (c *Client) Info(ctx context.Context) (*remote.Info, error) {
	resp, err := c.do(ctx, http.MethodGet, "session", nil, http.StatusOK)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxInfo+1))
	if err != nil {
		return nil, fmt.Errorf("GET session: %w", err)
	}
	if len(b) > maxInfo {
		return nil, fmt.Errorf("GET session: over %d bytes", maxInfo)
	}
	var info remote.Info
	if err := json.Unmarshal(b, &info); err != nil {
		return nil, fmt.Errorf("GET session: %w", err)
	}
	if info.Dispatch != c.dispatch {
		return nil, fmt.Errorf("GET session: it is dispatch %q's, want %q", info.Dispatch, c.dispatch)
	}
	return &info, nil
}

// File returns spec.Files[i]'s content, which the gateway serves once. When an attempt went
// unanswered and the gateway then says the file was served already (410), the gateway's
// outage consumed it (it died relaying it): a [LostError], which the worker exits
// [remote.ExitGatewayUnreachable] for, as for any outage the agent had no part in.
func (c *Client) File(ctx context.Context, i int, limit int64) ([]byte, error) {
	route := "files/" + strconv.Itoa(i)
	r := c.retry(http.MethodGet + " " + route)
	resp, err := c.doRetrier(ctx, r, http.MethodGet, route, nil, http.StatusOK)
	var se *StatusError
	if errors.As(err, &se) && se.Code == http.StatusGone && r.unanswered {
		return nil, &LostError{Op: http.MethodGet + " " + route, Err: err}
	}
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", route, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("GET %s: over %d bytes", route, limit)
	}
	return b, nil
}

// Fetch extracts mount m's content into dir. A download cut off by its connection (a
// gateway that restarted) is fetched again, whole, into an emptied dir.
func (c *Client) Fetch(ctx context.Context, m remote.Mount, dir string) error {
	route := "mounts/" + m.Name
	r := c.retry("GET " + route + " (whole)")
	for {
		resp, err := c.do(ctx, http.MethodGet, route, nil, http.StatusOK)
		if err != nil {
			return err
		}
		body := &readErr{r: resp.Body}
		err = Extract(body, dir)
		resp.Body.Close()
		if err == nil {
			r.recovered()
			return nil
		}
		if body.err == nil || !transient(ctx, body.err) {
			return fmt.Errorf("GET %s: %w", route, err)
		}
		if werr := r.wait(ctx, body.err); werr != nil {
			return werr
		}
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("GET %s: start again: %w", route, err)
		}
	}
}

// readErr keeps the first read error that is not the end of the stream.
type readErr struct {
	r   io.Reader
	err error
}

func (e *readErr) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF && e.err == nil {
		e.err = err
	}
	return n, err
}

// Upload sends dir's regular files and directories as mount m's content. Each attempt packs
// dir afresh; Pack writes the same bytes for the same tree, which the gateway recognises as a
// retry of an upload it stored but could not answer.
func (c *Client) Upload(ctx context.Context, m remote.Mount, dir string) error {
	route := "mounts/" + m.Name
	resp, err := c.do(ctx, http.MethodPut, route, func() io.ReadCloser {
		pr, pw := io.Pipe()
		go func() {
			err := Pack(pw, dir)
			if err != nil {
				err = &localError{fmt.Errorf("pack %s: %w", m.Dst, err)}
			}
			pw.CloseWithError(err)
		}()
		return pr
	}, http.StatusNoContent)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// DialTunnel opens a byte stream to the host socket sock of mount m, trying again across a
// gateway's outage (retry.go) within ctx. A tunnel over the dispatch's caps (429) is refused
// at once: the agent holds the others, and waiting would only stall its connection.
func (c *Client) DialTunnel(ctx context.Context, m, sock string) (net.Conn, error) {
	r := c.retry("tunnel " + m + "/" + sock)
	for {
		conn, err := c.dialTunnel(ctx, m, sock)
		if err == nil {
			r.recovered()
			return conn, nil
		}
		var se *StatusError
		if errors.As(err, &se) && (se.Code == http.StatusTooManyRequests || !transientStatus(se.Code)) ||
			!errors.As(err, &se) && !transient(ctx, err) {
			return nil, err
		}
		if werr := r.wait(ctx, err); werr != nil {
			return nil, werr
		}
	}
}

func (c *Client) dialTunnel(ctx context.Context, m, sock string) (net.Conn, error) {
	raw, err := dialer(c.socket)(ctx, "tcp", c.base.Host)
	var conn net.Conn
	if err == nil {
		tc := tls.Client(raw, c.tls)
		if err = tc.HandshakeContext(ctx); err != nil {
			raw.Close()
		}
		conn = tc
	}
	if err != nil {
		return nil, fmt.Errorf("tunnel %s/%s: %w", m, sock, err)
	}
	route := "sockets/" + m + "/" + sock
	req := "GET " + remote.RoutePrefix + c.dispatch + "/" + route + " HTTP/1.1\r\nHost: " + c.base.Host +
		"\r\nAuthorization: Bearer " + c.token + "\r\nConnection: Upgrade\r\nUpgrade: " + remote.TunnelUpgrade + "\r\n\r\n"
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	} else {
		conn.SetDeadline(time.Now().Add(dialTimeout))
	}
	if _, err := io.WriteString(conn, req); err != nil {
		conn.Close()
		return nil, fmt.Errorf("tunnel %s/%s: %w", m, sock, err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("tunnel %s/%s: %w", m, sock, err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		err := statusError(http.MethodGet, route, resp)
		conn.Close()
		return nil, err
	}
	conn.SetDeadline(time.Time{})
	return &bufConn{Conn: conn, r: br}, nil
}

// bufConn reads what the response reader buffered past the 101 first.
type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufConn) Read(p []byte) (int, error) { return b.r.Read(p) }

func (b *bufConn) CloseWrite() error {
	if cw, ok := b.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
