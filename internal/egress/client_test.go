package egress

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"
)

func mustParseURL(tb testing.TB, s string) *url.URL {
	tb.Helper()
	u, err := url.Parse(s)
	if err != nil {
		tb.Fatalf("parse %q: %v", s, err)
	}
	return u
}

func TestDialer_CheckURL(t *testing.T) {
	d := NewDialer(Policy{}, noResolver(t))
	tests := []struct {
		name   string
		url    *url.URL
		reason string // empty: allowed
	}{
		{"https name", mustParseURL(t, "https://api.example.com/v1?x=1#frag"), ""},
		{"http public ipv4 and port", mustParseURL(t, "http://1.1.1.1:8080/"), ""},
		{"public ipv6", mustParseURL(t, "https://[2606:4700::1111]:443/"), ""},
		{"uppercase scheme parsed", mustParseURL(t, "HTTPS://api.example.com/"), ""},

		{"nil", nil, "no URL"},
		{"ftp", mustParseURL(t, "ftp://api.example.com/"), `scheme "ftp"`},
		{"file", mustParseURL(t, "file:///etc/passwd"), `scheme "file"`},
		{"gopher", mustParseURL(t, "gopher://api.example.com:70/"), `scheme "gopher"`},
		{"no scheme", mustParseURL(t, "//api.example.com/"), `scheme ""`},
		{"built uppercase scheme", &url.URL{Scheme: "HTTP", Host: "api.example.com"}, `scheme "HTTP"`},
		{"opaque", mustParseURL(t, "http:api.example.com"), "opaque"},
		{"userinfo", mustParseURL(t, "https://alice:hunter2@api.example.com/"), "userinfo"},
		{"username only", mustParseURL(t, "https://alice@api.example.com/"), "userinfo"},
		{"no host", mustParseURL(t, "http:///path"), "no host"},
		{"port too large", mustParseURL(t, "http://api.example.com:65536/"), "port"},
		{"loopback", mustParseURL(t, "http://127.0.0.1:8080/"), "loopback"},
		{"metadata", mustParseURL(t, "http://169.254.169.254/latest/meta-data/"), "metadata"},
		{"loopback v6", mustParseURL(t, "http://[::1]/"), "loopback"},
		{"zone", mustParseURL(t, "http://[fe80::1%25eth0]/"), "zone"},
		{"ipv4-mapped", mustParseURL(t, "http://[::ffff:127.0.0.1]/"), "loopback"},
		{"decimal host", mustParseURL(t, "http://2130706433/"), "non-canonical IPv4"},
		{"hex host", mustParseURL(t, "http://0x7f.1/"), "non-canonical IPv4"},
		{"octal host", mustParseURL(t, "http://0177.0.0.1/"), "non-canonical IPv4"},
		{"trailing dot host", mustParseURL(t, "http://example.com./"), "ends in a dot"},
		{"non-ascii host", mustParseURL(t, "http://bücher.de/"), "non-ASCII"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := d.CheckURL(tt.url)
			if tt.reason == "" {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				return
			}
			wantDenied(t, err, tt.reason, "")
			if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "alice") {
				t.Errorf("error %q repeats the URL's userinfo", err)
			}
		})
	}
}

// redirectFixture is two httptest servers on 127.0.0.1: "from" redirects to its ?to= query,
// "target" counts what reaches it. The policy allows loopback by address, so only the host
// allow-list and the address rules tell the hops apart.
type redirectFixture struct {
	from, target *countingServer // from answers "ok" when ?to= is absent
	resolver     *fakeResolver
	client       *http.Client
	dials        *dialLog
}

func newRedirectFixture(t *testing.T, p Policy) *redirectFixture {
	t.Helper()
	f := &redirectFixture{}
	f.from = newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		if to := r.URL.Query().Get("to"); to != "" {
			http.Redirect(w, r, to, http.StatusFound)
			return
		}
		fmt.Fprint(w, "ok")
	})
	f.target = newCountingServer(t, nil)
	f.resolver = newFakeResolver(map[string][][]netip.Addr{
		"svc.test":         {addrs("127.0.0.1")},
		"a.ok.test":        {addrs("127.0.0.1")},
		"evil.test":        {addrs("127.0.0.1")},
		"rebind.ok.test":   {addrs("10.0.0.1")},
		"metadata.ok.test": {addrs("169.254.169.254")},
	})
	var d *Dialer
	d, f.dials = newTestDialer(t, p, f.resolver)
	f.client = d.Client(0)
	t.Cleanup(f.client.CloseIdleConnections)
	return f
}

func (f *redirectFixture) get(t *testing.T, to string) (int, error) {
	t.Helper()
	to = strings.ReplaceAll(to, "PORT", fmt.Sprint(f.target.port()))
	return get(t, f.client, fmt.Sprintf("http://svc.test:%d/?to=%s", f.from.port(), url.QueryEscape(to)))
}

func (f *redirectFixture) checkDials(t *testing.T) {
	t.Helper()
	for _, a := range f.dials.get() {
		if !strings.HasPrefix(a, "127.0.0.1:") {
			t.Errorf("dialed %s, want only 127.0.0.1", a)
		}
	}
}

func TestDialer_Client_Redirects(t *testing.T) {
	hostsPolicy := Policy{AllowPrivate: allowLoopback, Hosts: []string{"svc.test", "*.ok.test"}}
	tests := []struct {
		name   string
		p      Policy
		to     string
		reason string // empty: the redirect is followed and reaches target
		addr   string
	}{
		{"to an allowed name", hostsPolicy, "http://a.ok.test:PORT/", "", ""},
		{"relative", hostsPolicy, "/other", "", ""}, // stays on "from"; target not hit
		{"to loopback literal", hostsPolicy, "http://127.0.0.1:PORT/", "not in the allowed hosts", ""},
		{"to a host not listed", hostsPolicy, "http://evil.test:PORT/", "not in the allowed hosts", ""},
		{"to metadata literal", hostsPolicy, "http://169.254.169.254/latest/meta-data/", "metadata", "169.254.169.254"},
		{"to a listed name resolving private", hostsPolicy, "http://rebind.ok.test:PORT/", "RFC 1918", "10.0.0.1"},
		{"to a listed name resolving metadata", hostsPolicy, "http://metadata.ok.test/", "metadata", "169.254.169.254"},
		{"to ftp", hostsPolicy, "ftp://a.ok.test:PORT/", `scheme "ftp"`, ""},
		{"to file", hostsPolicy, "file:///etc/passwd", `scheme "file"`, ""},
		{"to userinfo", hostsPolicy, "http://alice:hunter2@a.ok.test:PORT/", "userinfo", ""},
		{"to decimal loopback", hostsPolicy, "http://2130706433:PORT/", "non-canonical IPv4", "127.0.0.1"},
		{"to metadata with link-local allowed", Policy{AllowPrivate: []netip.Prefix{
			netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("169.254.0.0/16"),
		}}, "http://169.254.169.254/", "metadata", "169.254.169.254"},
		{"to private literal without hosts list", Policy{AllowPrivate: allowLoopback}, "http://10.0.0.1:PORT/", "RFC 1918", "10.0.0.1"},
		{"to loopback literal when allowed", Policy{AllowPrivate: allowLoopback}, "http://127.0.0.1:PORT/", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newRedirectFixture(t, tt.p)
			status, err := f.get(t, tt.to)
			defer f.checkDials(t)
			if f.from.hits.Load() == 0 {
				t.Fatalf("first hop never reached the server (err %v)", err)
			}
			if tt.reason == "" {
				if err != nil || status != http.StatusOK {
					t.Fatalf("got %d, %v, want 200", status, err)
				}
				if tt.to != "/other" && f.target.hits.Load() != 1 {
					t.Errorf("target got %d requests, want 1", f.target.hits.Load())
				}
				return
			}
			wantDenied(t, err, tt.reason, tt.addr)
			if got := f.target.hits.Load(); got != 0 {
				t.Errorf("target got %d requests, want 0", got)
			}
			if strings.Contains(RedactError(err).Error(), "hunter2") {
				t.Errorf("redacted error %q repeats userinfo", RedactError(err))
			}
		})
	}
	t.Run("host not listed is never resolved", func(t *testing.T) {
		f := newRedirectFixture(t, hostsPolicy)
		_, err := f.get(t, "http://evil.test:PORT/")
		wantDenied(t, err, "not in the allowed hosts", "")
		if got := f.resolver.callsTo("evil.test"); got != 0 {
			t.Errorf("evil.test looked up %d times, want 0", got)
		}
	})
}

func TestDialer_Client_RedirectLimit(t *testing.T) {
	srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		var n int
		if _, err := fmt.Sscanf(r.URL.Path, "/hop/%d", &n); err != nil || n == 0 {
			fmt.Fprint(w, "done")
			return
		}
		http.Redirect(w, r, fmt.Sprintf("/hop/%d", n-1), http.StatusFound)
	})
	r := newFakeResolver(map[string][][]netip.Addr{"svc.test": {addrs("127.0.0.1")}})
	d, _ := newTestDialer(t, Policy{AllowPrivate: allowLoopback}, r)
	c := d.Client(0)
	defer c.CloseIdleConnections()

	status, err := get(t, c, fmt.Sprintf("http://svc.test:%d/hop/%d", srv.port(), maxRedirects))
	if err != nil || status != http.StatusOK {
		t.Fatalf("%d redirects: got %d, %v, want 200", maxRedirects, status, err)
	}
	if got := srv.hits.Load(); got != maxRedirects+1 {
		t.Errorf("got %d requests, want %d", got, maxRedirects+1)
	}

	srv.hits.Store(0)
	_, err = get(t, c, fmt.Sprintf("http://svc.test:%d/hop/%d", srv.port(), maxRedirects+1))
	wantDenied(t, err, "more than 5 redirects", "")
	if got := srv.hits.Load(); got != maxRedirects+1 {
		t.Errorf("got %d requests, want %d", got, maxRedirects+1)
	}
}

func TestDialer_Client_IgnoresProxyEnv(t *testing.T) {
	proxy := newCountingServer(t, nil)
	target := newCountingServer(t, nil)
	for _, k := range []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"} {
		t.Setenv(k, proxy.URL)
	}
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")

	r := newFakeResolver(map[string][][]netip.Addr{"svc.test": {addrs("127.0.0.1")}})
	d, log := newTestDialer(t, Policy{AllowPrivate: allowLoopback}, r)
	c := d.Client(0)
	defer c.CloseIdleConnections()
	url := fmt.Sprintf("http://svc.test:%d/", target.port())

	// http.ProxyFromEnvironment reads the environment once per process; if nothing read it
	// before this test, it now names the proxy, so a transport honouring it would use it.
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if pu, _ := http.ProxyFromEnvironment(req); pu == nil {
		t.Logf("http.ProxyFromEnvironment cached an empty environment; relying on the transport field check")
	}

	status, err := get(t, c, url)
	if err != nil || status != http.StatusOK {
		t.Fatalf("GET: got %d, %v, want 200", status, err)
	}
	if got := proxy.hits.Load(); got != 0 {
		t.Errorf("proxy got %d requests, want 0", got)
	}
	if got := target.hits.Load(); got != 1 {
		t.Errorf("target got %d requests, want 1", got)
	}
	want := fmt.Sprintf("127.0.0.1:%d", target.port())
	if got := log.get(); len(got) != 1 || got[0] != want {
		t.Errorf("dials %v, want [%s]", got, want)
	}
	tr, ok := c.Transport.(*vettingTransport)
	if !ok {
		t.Fatalf("got transport %T, want *vettingTransport", c.Transport)
	}
	if tr.base.Proxy != nil {
		t.Errorf("transport has a Proxy func, want nil")
	}
}

func TestDialer_Client_VetsFirstRequest(t *testing.T) {
	target := newCountingServer(t, nil)
	r := newFakeResolver(map[string][][]netip.Addr{"svc.test": {addrs("127.0.0.1")}})
	d, log := newTestDialer(t, Policy{AllowPrivate: allowLoopback}, r)
	c := d.Client(0)
	defer c.CloseIdleConnections()

	_, err := get(t, c, fmt.Sprintf("http://alice:hunter2@svc.test:%d/", target.port()))
	wantDenied(t, err, "userinfo", "")
	if got := target.hits.Load(); got != 0 {
		t.Errorf("target got %d requests, want 0", got)
	}
	if got := log.get(); len(got) != 0 {
		t.Errorf("dialed %v, want no dial", got)
	}
}

func TestDialer_Client_Timeout(t *testing.T) {
	d := NewDialer(Policy{}, nil)
	if got := d.Client(0).Timeout; got != defaultClientTimeout {
		t.Errorf("Client(0).Timeout = %v, want %v", got, defaultClientTimeout)
	}
	if got := d.Client(-1).Timeout; got != defaultClientTimeout {
		t.Errorf("Client(-1).Timeout = %v, want %v", got, defaultClientTimeout)
	}
	if got := d.Client(7e9).Timeout; got != 7e9 {
		t.Errorf("Client(7s).Timeout = %v, want 7s", got)
	}
}

func TestRedactError(t *testing.T) {
	r := newFakeResolver(map[string][][]netip.Addr{"svc.test": {addrs("127.0.0.1")}})
	d, _ := newTestDialer(t, Policy{}, r) // loopback denied, so every request fails
	c := d.Client(0)
	defer c.CloseIdleConnections()
	secrets := []string{"hunter2", "alice", "s3cr3t-token", "private-path", "frag"}
	for _, raw := range []string{
		"http://svc.test:8080/private-path?token=s3cr3t-token#frag",
		"http://alice:hunter2@svc.test/private-path?token=s3cr3t-token",
	} {
		_, err := get(t, c, raw)
		if err == nil {
			t.Fatalf("GET %s: got nil error, want a refusal", raw)
		}
		if !strings.Contains(err.Error(), "s3cr3t-token") {
			t.Fatalf("unredacted error %q no longer carries the query; the redaction test proves nothing", err)
		}
		red := RedactError(err)
		for _, s := range secrets {
			if strings.Contains(red.Error(), s) {
				t.Errorf("RedactError(%q) = %q, still contains %q", err, red, s)
			}
		}
		if !strings.Contains(red.Error(), "http://svc.test") {
			t.Errorf("RedactError gave %q, want it to name http://svc.test", red)
		}
		if !errors.Is(red, ErrDenied) {
			t.Errorf("RedactError(%v) lost the cause", err)
		}
	}
	plain := errors.New("plain")
	if RedactError(plain) != plain {
		t.Errorf("RedactError changed an error that is not a *url.Error")
	}
	if got := RedactError(&url.Error{Op: "Get", URL: "::bad", Err: plain}).Error(); strings.Contains(got, "::bad") {
		t.Errorf("got %q, want an unparseable URL redacted", got)
	}
}
