package proxy

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agora-dev/agora/internal/audit/entry"
)

// Attack (HIGH): the placeholder sent over plain HTTP (no CONNECT, no TLS) to a host it is
// not bound to, in every place a request carries text: refused and audited, never sent, on
// the first request of a connection and on a kept-alive one.
func TestAttack_PlaceholderOverPlainHTTPToUnboundHost(t *testing.T) {
	const ph = "agora-placeholder-0123456789abcdef"
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	_, port := hostPort(t, srv.URL)
	f := start(t, Config{
		Rules:    rules(t, "127.0.0.1:"+port),
		Bindings: []Binding{{Key: "GITHUB_TOKEN", Placeholder: ph, Value: []byte("secret-value-123456"), Hosts: []string{"api.github.com"}}},
	}, nil)
	base := "http://127.0.0.1:" + port
	for _, head := range []string{
		"GET " + base + "/" + ph + " HTTP/1.1\r\n",
		"GET " + base + "/?t=" + ph + " HTTP/1.1\r\n",
		"GET " + base + "/ HTTP/1.1\r\nCookie: t=" + ph + "\r\n",
		"GET " + base + "/ HTTP/1.1\r\nX-" + ph + ": 1\r\n",
		"GET " + base + "/ HTTP/1.1\r\nAuthorization: token " + ph + "\r\n",
		"GET " + base + "/ HTTP/1.1\r\nUser-Agent: curl " + ph + "\r\n",
	} {
		resp, body := rawExchange(t, f.url.Host, head+"Host: 127.0.0.1:"+port+"\r\n\r\n")
		if resp.StatusCode != 403 || !strings.Contains(body, "GITHUB_TOKEN, which is not bound to this host") {
			t.Errorf("%q = %d %q", head, resp.StatusCode, body)
		}
	}
	// A kept-alive connection: the first request is clean, the second carries the placeholder.
	c := dialProxy(t, f.url.Host)
	br := bufioReader(c)
	if resp, _ := sendOn(t, c, br, "GET "+base+"/ok HTTP/1.1\r\nHost: 127.0.0.1:"+port+"\r\n\r\n"); resp.StatusCode != 200 {
		t.Fatalf("clean request: %d", resp.StatusCode)
	}
	if resp, _ := sendOn(t, c, br, "GET "+base+"/ HTTP/1.1\r\nHost: 127.0.0.1:"+port+"\r\nAuthorization: Bearer "+ph+"\r\n\r\n"); resp.StatusCode != 403 {
		t.Fatalf("kept-alive request with the placeholder: %d", resp.StatusCode)
	}
	if n := hits.Load(); n != 1 {
		t.Fatalf("the host got %d requests, want only the clean one", n)
	}
	if n := len(f.audit.find(entry.NetRequest, "deny")); n != 7 {
		t.Fatalf("net.request denials = %d, want 7:\n%s", n, f.audit.dump())
	}
}

// A bound value shorter than the redactor's minimum could not be masked in what the host
// sends back: the proxy refuses such a binding, naming the key, never the value.
func TestAttack_ShortBoundSecretRefused(t *testing.T) {
	f := start(t, Config{}, nil)
	_, err := New(Config{
		Dialer: f.p.cfg.Dialer, Audit: &memAudit{},
		Bindings: []Binding{{Key: "PIN", Placeholder: "agora-placeholder-00", Value: []byte("1234567"), Hosts: []string{"a.test"}}},
	})
	if err == nil || !strings.Contains(err.Error(), `"PIN"`) || strings.Contains(err.Error(), "1234567") {
		t.Fatalf("err = %v, want a refusal naming PIN without its value", err)
	}
}
