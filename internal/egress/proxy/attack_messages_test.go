package proxy

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit/entry"
)

// Attack: a bound host answers with text that embeds the value it received (a broken status
// line, a malformed header, a made-up Content-Encoding), hoping an error message carries it
// to the sandbox, the audit or the dispatch's notices. None may hold the value.
func TestAttack_SecretNeverInMessages(t *testing.T) {
	const value = "ghp_realTOKENvalue0123456789"
	const ph = "agora-placeholder-aaaabbbbccccdddd"
	answers := map[string]func(tok string) string{
		"/status": func(tok string) string { return "HTTP/1.1 2" + tok + " OK\r\n\r\n" },
		"/proto":  func(tok string) string { return tok + " 200 OK\r\n\r\n" },
		"/header": func(tok string) string { return "HTTP/1.1 200 OK\r\n" + tok + "\r\n\r\n" },
		"/encoding": func(tok string) string {
			return "HTTP/1.1 200 OK\r\nContent-Encoding: " + tok + "\r\nContent-Length: 1\r\n\r\nx"
		},
		"/length": func(tok string) string { return "HTTP/1.1 200 OK\r\nContent-Length: " + tok + "\r\n\r\n" },
		"/encoding-long": func(tok string) string {
			return "HTTP/1.1 200 OK\r\nContent-Encoding: " + strings.Repeat("x", 20) + tok + "\r\nContent-Length: 1\r\n\r\nx"
		},
		"/status-long": func(tok string) string { return "HTTP/1.1 2" + strings.Repeat("0", 180) + tok + " OK\r\n\r\n" },
		"/chunked":     func(tok string) string { return "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + tok + "\r\n" },
	}
	// A TLS host (a bound secret goes only into TLS) that writes the raw answer itself.
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		c, bw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		bw.WriteString(answers[r.URL.Path](tok))
		bw.Flush()
	}))
	defer srv.Close()
	_, port := hostPort(t, srv.URL)
	ca, err := NewCA("d-test", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var notices []string
	var mu sync.Mutex
	f := start(t, Config{
		Rules: rules(t, "127.0.0.1:"+port), CA: ca, Roots: poolOf(srv.Certificate()),
		Bindings: []Binding{{Key: "GITHUB_TOKEN", Placeholder: ph, Value: []byte(value), Hosts: []string{"127.0.0.1:" + port}}},
		Notice:   func(s string) { mu.Lock(); notices = append(notices, s); mu.Unlock() },
	}, nil)
	for path := range answers {
		tc := tlsThrough(t, f.url.Host, "127.0.0.1:"+port, poolFromCA(ca))
		resp, body := sendOn(t, tc, bufio.NewReader(tc), "GET "+path+" HTTP/1.1\r\nHost: 127.0.0.1:"+port+"\r\nAuthorization: Bearer "+ph+"\r\n\r\n")
		tc.Close()
		if strings.Contains(body, value[:12]) || strings.Contains(resp.Status, value[:12]) {
			t.Errorf("%s: the sandbox read the value: %s %q", path, resp.Status, body)
		}
	}
	if len(f.audit.find(entry.NetClose, "")) == 0 {
		t.Fatal("no connection reached the host")
	}
	f.p.Close()
	if dump := f.audit.dump(); strings.Contains(dump, value[:12]) {
		t.Errorf("the audit holds the value:\n%s", dump)
	}
	if strings.Contains(strings.Join(notices, "\n"), value[:12]) {
		t.Errorf("a notice holds the value: %q", notices)
	}
}
