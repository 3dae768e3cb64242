package egress

import (
	"crypto/tls"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

const (
	// maxRedirects is how many redirects a [Dialer.Client] follows before refusing.
	maxRedirects = 5
	// defaultClientTimeout replaces a zero or negative timeout given to [Dialer.Client].
	defaultClientTimeout = 30 * time.Second

	tlsHandshakeTimeout    = 10 * time.Second
	idleConnTimeout        = 90 * time.Second
	expectContinueTimeout  = time.Second
	maxIdleConns           = 16
	maxResponseHeaderBytes = 1 << 20
)

// Client returns an [*http.Client] whose transport dials only through d and never through a
// proxy (HTTP_PROXY and friends are ignored), whose requests are vetted with [Dialer.CheckURL]
// before they are sent, and which follows at most 5 redirects, vetting each target the same
// way. The whole exchange, redirects included, is bounded by timeout (zero or negative means
// 30s; there is no unbounded client).
//
// The client's errors are [*url.Error] values that net/http fills with the request URL,
// query string included; pass them through [RedactError] before logging or recording them.
func (d *Dialer) Client(timeout time.Duration) *http.Client {
	if timeout <= 0 {
		timeout = defaultClientTimeout
	}
	base := &http.Transport{
		Proxy:                  nil,
		DialContext:            d.DialContext,
		ForceAttemptHTTP2:      true,
		TLSClientConfig:        &tls.Config{MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:    tlsHandshakeTimeout,
		IdleConnTimeout:        idleConnTimeout,
		ExpectContinueTimeout:  expectContinueTimeout,
		MaxIdleConns:           maxIdleConns,
		MaxResponseHeaderBytes: maxResponseHeaderBytes,
	}
	return &http.Client{
		Transport:     &vettingTransport{d: d, base: base},
		CheckRedirect: d.checkRedirect,
		Timeout:       timeout,
	}
}

func (d *Dialer) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > maxRedirects {
		return &DeniedError{Host: req.URL.Hostname(), Reason: "more than " + strconv.Itoa(maxRedirects) + " redirects"}
	}
	return d.CheckURL(req.URL)
}

// vettingTransport refuses any request whose URL fails CheckURL, before base sees it.
type vettingTransport struct {
	d    *Dialer
	base *http.Transport
}

func (t *vettingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := t.d.CheckURL(req.URL); err != nil {
		if req.Body != nil {
			req.Body.Close() // a RoundTripper must close the body, even on error
		}
		return nil, err
	}
	return t.base.RoundTrip(req)
}

// CloseIdleConnections lets [http.Client.CloseIdleConnections] reach the pooled connections.
func (t *vettingTransport) CloseIdleConnections() { t.base.CloseIdleConnections() }

// CheckURL vets u before use: the scheme is http or https, there is no userinfo and no opaque
// part, the port (if any) is a number, and the host passes [Policy.CheckHost] under d's policy.
// A host name is not resolved here; [Dialer.DialContext] vets its addresses. Every refusal is a
// [*DeniedError] naming at most the host.
func (d *Dialer) CheckURL(u *url.URL) error {
	if u == nil {
		return &DeniedError{Reason: "no URL"}
	}
	host := u.Hostname()
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return &DeniedError{Host: host, Reason: "URL scheme " + strconv.Quote(truncate(u.Scheme, 16)) + " is not http or https"}
	case u.Opaque != "":
		return &DeniedError{Host: host, Reason: "opaque URL"}
	case u.User != nil:
		return &DeniedError{Host: host, Reason: "URL has userinfo (send credentials in a header)"}
	case u.Host == "":
		return &DeniedError{Reason: "URL has no host"}
	}
	if port := u.Port(); port != "" {
		if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			return &DeniedError{Host: host, Reason: "URL port is not a number from 0 to 65535"}
		}
	}
	return d.policy.CheckHost(host)
}

// RedactError returns err with the URL of a top-level [*url.Error] (what [http.Client]
// methods return) cut down to scheme://host[:port], so userinfo, path, query string and
// fragment, any of which may carry a token, stay out of logs and records. Other errors are
// returned unchanged.
func RedactError(err error) error {
	ue, ok := err.(*url.Error)
	if !ok {
		return err
	}
	return &url.Error{Op: ue.Op, URL: redactURL(ue.URL), Err: ue.Err}
}

func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return "(url redacted)"
	}
	return u.Scheme + "://" + u.Host
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
