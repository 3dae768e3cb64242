package proxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agora-dev/agora/internal/grant"
)

// Attack (HIGH): a rule allows GET (and POST); a request overrides its method in a header
// or a "_method" query parameter that frameworks honour. The override counts as the method:
// refused unless the grant allows it too.
func TestAttack_MethodOverride(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	_, port := hostPort(t, srv.URL)
	r := []grant.EgressRule{{Host: "127.0.0.1", Methods: []string{"GET", "POST"}}}
	f := start(t, Config{Rules: r}, nil)
	base := "http://127.0.0.1:" + port
	for _, tc := range []struct{ method, path, header string }{
		{"GET", "/x", "X-HTTP-Method-Override: DELETE"},
		{"POST", "/x", "X-HTTP-Method: DELETE"},
		{"GET", "/x", "X-Method-Override: PUT"},
		{"GET", "/x", "x-http-method-override: delete"},
		{"GET", "/x", "X-HTTP-Method-Override: GET\r\nX-HTTP-Method-Override: DELETE"},
		{"POST", "/x?_method=DELETE", ""},
		{"POST", "/x?a=1&_method=patch", ""},
	} {
		head := tc.method + " " + base + tc.path + " HTTP/1.1\r\nHost: 127.0.0.1:" + port + "\r\nContent-Length: 0\r\n"
		if tc.header != "" {
			head += tc.header + "\r\n"
		}
		resp, body := rawExchange(t, f.url.Host, head+"\r\n")
		if resp.StatusCode != 403 || !strings.Contains(body, "override") {
			t.Errorf("%s %s with %q = %d %q, want a 403 naming the override", tc.method, tc.path, tc.header, resp.StatusCode, body)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the host got %d overridden requests", n)
	}
	// An override naming an allowed method passes.
	resp, body := rawExchange(t, f.url.Host, "POST "+base+"/x HTTP/1.1\r\nHost: 127.0.0.1:"+port+"\r\nContent-Length: 0\r\nX-HTTP-Method-Override: GET\r\n\r\n")
	if resp.StatusCode != 200 || hits.Load() != 1 {
		t.Fatalf("an allowed override = %d %q", resp.StatusCode, body)
	}
	// A methods-only rule does not judge paths: an encoded slash or an empty segment passes.
	resp, body = rawExchange(t, f.url.Host, "GET "+base+"/a//b%2Fc HTTP/1.1\r\nHost: 127.0.0.1:"+port+"\r\n\r\n")
	if resp.StatusCode != 200 {
		t.Fatalf("a methods-only rule refused a path: %d %q", resp.StatusCode, body)
	}
}
