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

// Attack (HIGH): inside a terminated TLS session to the bound host, a request names another
// host (Host header, absolute-form URI, another port): refused before the placeholder is
// swapped, never sent. Over plain HTTP the URL's host wins: a Host header naming another
// host is not what the host sees.
func TestAttack_HostSwitchInsideATerminatedSession(t *testing.T) {
	const value = "ghp_realTOKENvalue0123456789"
	const ph = "agora-placeholder-aaaabbbbccccdddd"
	var mu sync.Mutex
	var seen []string
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Host+" "+r.Header.Get("Authorization"))
		mu.Unlock()
	})
	srv := httptest.NewTLSServer(handler)
	defer srv.Close()
	plainSrv := httptest.NewServer(handler)
	defer plainSrv.Close()
	_, port := hostPort(t, srv.URL)
	_, pport := hostPort(t, plainSrv.URL)
	ca, err := NewCA("d-test", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	f := start(t, Config{
		Rules: rules(t, "127.0.0.1", "evil.test"), CA: ca, Roots: poolOf(srv.Certificate()),
		Bindings: []Binding{{Key: "GITHUB_TOKEN", Placeholder: ph, Value: []byte(value), Hosts: []string{"127.0.0.1:" + port}}},
	}, resolver{"evil.test": "127.0.0.1"})
	auth := "Authorization: Bearer " + ph + "\r\n"
	for _, head := range []string{
		"GET / HTTP/1.1\r\nHost: evil.test\r\n",
		"GET / HTTP/1.1\r\nHost: evil.test:" + port + "\r\n",
		"GET / HTTP/1.1\r\nHost: 127.0.0.1:1\r\n",
		"GET https://evil.test:" + port + "/ HTTP/1.1\r\nHost: 127.0.0.1:" + port + "\r\n",
		"GET http://evil.test/ HTTP/1.1\r\nHost: 127.0.0.1:" + port + "\r\n",
	} {
		tc := tlsThrough(t, f.url.Host, "127.0.0.1:"+port, poolFromCA(ca))
		resp, body := sendOn(t, tc, bufio.NewReader(tc), head+auth+"\r\n")
		tc.Close()
		if resp.StatusCode != 403 || !strings.Contains(body, "another host") {
			t.Errorf("%q = %d %q, want a 403 naming the host switch", head, resp.StatusCode, body)
		}
	}
	// Plain HTTP: the Host header names another host; the URL's host is the one reached and
	// the one the host is told.
	resp, _ := rawExchange(t, f.url.Host, "GET http://127.0.0.1:"+pport+"/ HTTP/1.1\r\nHost: evil.test\r\n\r\n")
	if resp.StatusCode != 200 {
		t.Fatalf("plain request: %d", resp.StatusCode)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || seen[0] != "127.0.0.1:"+pport+" " {
		t.Fatalf("the hosts saw %q; only the plain request, with the URL's host, may arrive", seen)
	}
	if n := len(f.audit.find(entry.NetRequest, "deny")); n != 5 {
		t.Fatalf("net.request denials = %d:\n%s", n, f.audit.dump())
	}
}
