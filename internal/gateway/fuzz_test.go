package gateway

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/egress"

	"github.com/agora-dev/agora/internal/grant"
)

// fuzzGrants are the grants FuzzFetchRequest runs under; refGranted is an independent
// statement of what they allow.
var fuzzGrants = []grant.EgressRule{{Host: "granted.test"}, {Host: "*.docs.test"}, {Host: "10.1.2.3"}, {Host: "2001:db8::1"}}

func refGranted(host string) bool {
	for i := 0; i < len(host); i++ {
		if host[i] >= 0x80 || host[i] >= 'A' && host[i] <= 'Z' {
			return false // what is dialed is ASCII; compare it lowercase
		}
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip.String() == host && (host == "10.1.2.3" || host == "2001:db8::1")
	}
	return host == "granted.test" || strings.HasSuffix(host, ".docs.test") && len(host) > len(".docs.test")
}

// noLookup fails every resolution: the fuzz target must never reach the network.
type noLookup struct{}

func (noLookup) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return nil, errors.New("no lookups in the fuzz target")
}

// FuzzFetchRequest checks that decoding a /fetch body never panics and never yields a
// request to a host the grants do not allow, nor one with userinfo, another scheme or
// another method; and that the redirect vetting agrees on arbitrary URLs.
func FuzzFetchRequest(f *testing.F) {
	for _, seed := range []string{
		`{"url":"http://granted.test/a?b=c"}`,
		`{"url":"https://x.docs.test:8443/","method":"HEAD"}`,
		`{"url":"http://GRANTED.test/"}`,
		`{"url":"http://docs.test/"}`,
		`{"url":"http://evil.test/"}`,
		`{"url":"http://granted.test.evil.test/"}`,
		`{"url":"http://evil.test\\@granted.test/"}`,
		`{"url":"http://granted.test@evil.test/"}`,
		`{"url":"http://user:pw@granted.test/"}`,
		`{"url":"http://10.1.2.3/"}`,
		`{"url":"http://10.1.2.4/"}`,
		`{"url":"http://[2001:db8::1]:80/"}`,
		`{"url":"http://[::ffff:10.1.2.3]/"}`,
		`{"url":"http://0x0a.1.2.3/"}`,
		`{"url":"http://gr%61nted.test/"}`,
		`{"url":"file:///etc/passwd"}`,
		`{"url":"//granted.test/"}`,
		`{"url":"http://granted.test/","url":"http://evil.test/"}`,
		`{"url":"http://granted.test/","URL":"http://evil.test/"}`,
		`{"url":"http://granted.test/","method":"POST"}`,
		`{"url":"http://xn--grnted-cua.test/"}`,
		"{\"url\":\"http://gr\u0430nted.test/\"}",
		`{"url":"http://[fe80::1%25eth0]/"}`,
		`[]`, `{`, ``,
	} {
		f.Add([]byte(seed))
	}
	g, err := newGateway(Config{
		DispatchID: testDispatchID, Role: testRole, Egress: fuzzGrants,
		// The dialer admits the private ranges, so only the grants stand between an IP
		// literal and a request.
		Dialer: egress.NewDialer(egress.Policy{AllowPrivate: []netip.Prefix{
			netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8::/32"),
		}}, noLookup{}),
		Audit: &fakeAuditor{},
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, _, _, err := g.decodeFetch(context.Background(), body)
		if err == nil {
			u := req.URL
			switch {
			case !refGranted(u.Hostname()) && !refGranted(strings.ToLower(u.Hostname())):
				t.Fatalf("decoded a request to ungranted host %q from %q", u.Hostname(), body)
			case u.Scheme != "http" && u.Scheme != "https":
				t.Fatalf("decoded a %q request from %q", u.Scheme, body)
			case u.User != nil:
				t.Fatalf("decoded a request with userinfo from %q", body)
			case req.Method != http.MethodGet && req.Method != http.MethodHead:
				t.Fatalf("decoded a %s request from %q", req.Method, body)
			case len(req.Header) != 2 || req.Header.Get("User-Agent") != fetchUserAgent || req.Header.Get("Accept-Encoding") != "identity":
				t.Fatalf("decoded request carries headers %v", req.Header)
			}
		}
		// The same vetting guards every redirect hop.
		if u, err := url.Parse(string(body)); err == nil && g.vetTarget(u, "GET") == nil {
			if !refGranted(strings.ToLower(u.Hostname())) || u.User != nil {
				t.Fatalf("redirect vetting admitted %q", body)
			}
		}
	})
}

// TestGateway_DecodeFetch pins what the fuzz target's grants admit, so the fuzz target is not
// vacuous: granted names, subdomains and IP literals decode to a request.
func TestGateway_DecodeFetch(t *testing.T) {
	g, err := newGateway(Config{
		DispatchID: testDispatchID, Role: testRole, Egress: fuzzGrants,
		Dialer: egress.NewDialer(egress.Policy{AllowPrivate: []netip.Prefix{
			netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8::/32"),
		}}, noLookup{}),
		Audit: &fakeAuditor{},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		body, wantURL, wantErr string
	}{
		{`{"url":"http://granted.test/a?b=c#f"}`, "http://granted.test/a?b=c", ""},
		{`{"url":"https://X.Docs.test:8443/","method":"HEAD"}`, "https://X.Docs.test:8443/", ""},
		{`{"url":"http://10.1.2.3/"}`, "http://10.1.2.3/", ""},
		{`{"url":"http://[2001:db8::1]:80/"}`, "http://[2001:db8::1]:80/", ""},
		{`{"url":"http://gr%61nted.test/"}`, "", "does not parse"},
		{`{"url":"http://10.1.2.4/"}`, "", `host "10.1.2.4" is not granted`},
		{`{"url":"http://[::ffff:10.1.2.3]/"}`, "", `host "::ffff:10.1.2.3" is not granted`},
		{`{"url":"http://evil.test\\@granted.test/"}`, "", "does not parse"},
		{`{"url":"http://granted.test@evil.test/"}`, "", "URL has userinfo"},
		{"{\"url\":\"http://gr\u0430nted.test/\"}", "", "not ASCII"},
		{`{"url":"http://[fe80::1%25eth0]/"}`, "", "has a zone"},
	} {
		t.Run(tc.body, func(t *testing.T) {
			req, _, _, err := g.decodeFetch(t.Context(), []byte(tc.body))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("got %v, want a request", err)
			}
			if req.URL.String() != tc.wantURL {
				t.Errorf("got URL %s, want %s", req.URL, tc.wantURL)
			}
		})
	}
}

// FuzzCheckCoding checks that the Content-Encoding check passes a body only when every
// element of every header value is identity (or empty), never one that names a coding, and
// that its refusal repeats a bounded part of the header.
func FuzzCheckCoding(f *testing.F) {
	for _, seed := range [][2]string{
		{"identity", ""}, {"Identity", " , IDENTITY"}, {"", ""}, {",", "\t"},
		{"deflate", ""}, {"gzip", ""}, {"identity, gzip", ""}, {"identity", "br"},
		{"identityidentity", ""}, {"identity;q=1", ""}, {"x-gzip", ""}, {"zstd, identity", ""},
		{"ıdentity", ""}, {"identity\x00", ""}, {strings.Repeat("a", 300), ""},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, v1, v2 string) {
		h := http.Header{}
		h.Add("Content-Encoding", v1)
		if v2 != "" {
			h.Add("Content-Encoding", v2)
		}
		err := checkCoding(h)
		if err != nil {
			if n := len(err.Error()); n > 300 { // 35 bytes quoted at most 4 to a byte, and the sentence
				t.Fatalf("refusal is %d bytes, want the coding clipped", n)
			}
			return
		}
		for _, v := range []string{v1, v2} {
			for _, el := range strings.Split(v, ",") {
				el = strings.ToLower(strings.Trim(el, " \t"))
				if el != "" && el != "identity" {
					t.Fatalf("passed a body in coding %q (header %q, %q)", el, v1, v2)
				}
			}
		}
	})
}
