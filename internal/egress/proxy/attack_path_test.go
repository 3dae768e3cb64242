package proxy

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/grant"
)

// Attack (HIGH): path-prefix bypasses on a restricted rule. Every request that a server could
// read as a path outside the prefix is refused with a 403 sentence and a net.request entry,
// and never reaches the host; the allowed ones do.
func TestAttack_PathPrefixBypass(t *testing.T) {
	var seen []string
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.RequestURI)
		mu.Unlock()
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	_, port := hostPort(t, srv.URL)
	r := []grant.EgressRule{{Host: "127.0.0.1", Methods: []string{"GET"}, Paths: []string{"/repos/acme/", "/repos/beta"}}}
	f := start(t, Config{Rules: r}, nil)
	base := "http://127.0.0.1:" + port
	refused := []string{
		"/repos/acme/../other",
		"/repos/acme/%2e%2e/other",
		"/repos/acme/%2E%2e/other",
		"/repos/acme/%2E%2e%2F/other",
		"/repos/acme/%252e%252e/other",
		"/repos/acme/%252f..%252fother",
		"/repos/acme%2f..%2fother",
		"/repos/acme/%5c..%5cother",
		"/repos/acme/..\\other",
		"/repos/acme/x\\..\\..\\other",
		"/repos/acme//x",
		"/repos/acme/..;/other",
		"/repos/acme/.;/x",
		"/repos/acme/x%00.json",
		"/repos/acme/x%0d%0aX-Injected:%20y",
		"/repos/betaevil",
		"/repos/beta;x",
		"/repos/other#/repos/acme/",
		"/repos/acme/#/../../other",
	}
	allowed := []string{"/repos/acme/x", "/repos/acme/x?q=%2f..%2f", "/repos/beta", "/repos/beta/x", "/repos/acme/x;y/z"}
	for _, path := range refused {
		resp, body := rawExchange(t, f.url.Host, "GET "+base+path+" HTTP/1.1\r\nHost: 127.0.0.1:"+port+"\r\n\r\n")
		if resp.StatusCode != 403 || !strings.Contains(body, "agora refused") {
			t.Errorf("GET %s = %d %q, want a 403 sentence", path, resp.StatusCode, body)
		}
	}
	for _, path := range allowed {
		resp, body := rawExchange(t, f.url.Host, "GET "+base+path+" HTTP/1.1\r\nHost: 127.0.0.1:"+port+"\r\n\r\n")
		if resp.StatusCode != 200 {
			t.Errorf("GET %s = %d %q, want 200", path, resp.StatusCode, body)
		}
	}
	// An absolute-form URL names another path than the one the grant allows: its own path
	// is the one checked.
	resp, body := rawExchange(t, f.url.Host, "GET "+base+"/repos/other HTTP/1.1\r\nHost: 127.0.0.1:"+port+"\r\nX-Original-URL: /repos/acme/x\r\n\r\n")
	if resp.StatusCode != 403 {
		t.Errorf("absolute-form to another path = %d %q", resp.StatusCode, body)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != len(allowed) {
		t.Fatalf("the host saw %q; only the %d allowed requests may reach it", seen, len(allowed))
	}
	if n := len(f.audit.find(entry.NetRequest, "deny")); n != len(refused)+1 {
		t.Fatalf("net.request denials = %d, want %d:\n%s", n, len(refused)+1, f.audit.dump())
	}
}

// The refusal of an ambiguous encoding says what was wrong, in one sentence.
func TestAttack_PathEncodingRefusalSaysWhy(t *testing.T) {
	r := []grant.EgressRule{{Host: "127.0.0.1", Paths: []string{"/repos/acme/"}}}
	f := start(t, Config{Rules: r}, nil)
	for path, want := range map[string]string{
		"/repos/acme/%2e%2e/x": `"%2e"`,
		"/repos/acme/%252e/x":  `"%25"`,
		"/repos/acme%2fx":      `"%2f"`,
		"/repos/acme/a\\b":     `"%5c"`,
		"/repos/acme/../x":     `".."`,
		"/repos/acmex/":        "the grant does not allow GET /repos/acmex/",
	} {
		resp, body := rawExchange(t, f.url.Host, "GET http://127.0.0.1:1"+path+" HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n")
		if resp.StatusCode != 403 || !strings.Contains(body, want) || strings.Count(body, ". ") > 0 {
			t.Errorf("GET %s = %d %q, want a sentence naming %s", path, resp.StatusCode, body, want)
		}
	}
}

// Inside a terminated TLS session, an absolute-form request target carries its own path:
// that path is the one judged, whatever a Host header or an X-Original-URL says.
func TestAttack_PathInAbsoluteFormInsideTLS(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	_, port := hostPort(t, srv.URL)
	ca, err := NewCA("d-test", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	r := []grant.EgressRule{{Host: "127.0.0.1", Methods: []string{"GET"}, Paths: []string{"/repos/acme/"}}}
	f := start(t, Config{Rules: r, CA: ca, Roots: poolOf(srv.Certificate())}, nil)
	for _, target := range []string{
		"https://127.0.0.1:" + port + "/repos/other",
		"https://127.0.0.1:" + port + "/repos/acme/%2e%2e/other",
		"//127.0.0.1:" + port + "/repos/other",
	} {
		tc := tlsThrough(t, f.url.Host, "127.0.0.1:"+port, poolFromCA(ca))
		resp, body := sendOn(t, tc, bufio.NewReader(tc), "GET "+target+" HTTP/1.1\r\nHost: 127.0.0.1:"+port+"\r\nX-Original-URL: /repos/acme/x\r\n\r\n")
		tc.Close()
		if resp.StatusCode != 403 {
			t.Errorf("GET %s = %d %q, want 403", target, resp.StatusCode, body)
		}
	}
	if hits.Load() != 0 {
		t.Fatalf("the host got %d requests outside the prefix", hits.Load())
	}
}
