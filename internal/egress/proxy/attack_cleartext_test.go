package proxy

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit/entry"
)

// recordingServer is a plain-HTTP host on 127.0.0.1 that keeps every byte it receives and
// answers each request 200 "ok".
type recordingServer struct {
	mu  sync.Mutex
	got bytes.Buffer
}

func (s *recordingServer) bytes() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got.String()
}

func (s *recordingServer) serve(c net.Conn) {
	c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(io.TeeReader(c, writerFunc(func(p []byte) (int, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.got.Write(p)
	})))
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		io.Copy(io.Discard, req.Body)
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// Attack: a secret bound to a host (no port named: a binding made before
// bindings had ports) and a plain-HTTP request to that host carrying its placeholder. The
// proxy used to swap the real value into the Authorization header of the unencrypted
// connection. Now a bound secret goes only into TLS sessions the proxy terminates and
// re-encrypts, on port 443 unless the binding names another: the plain request is refused
// before any connection is made, audited with the reason, and the host receives nothing of
// the secret (asserted on the bytes it got). A TLS request to the binding's port still gets
// the swap; a TLS request to another port of the same host is refused.
func TestAttack_BoundSecretNeverInCleartext(t *testing.T) {
	const value = "ghp_CLEARtextVALUE0123456789abcd"
	const phLegacy = "agora-placeholder-1111222233334444"
	const phPinned = "agora-placeholder-5555666677778888"
	plain := &recordingServer{}
	plainPort, _ := rawServer(t, plain.serve)

	var mu sync.Mutex
	seen := map[string][]string{} // server -> Authorization values received
	tlsServer := func(name string) *httptest.Server {
		srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen[name] = append(seen[name], r.Header.Get("Authorization")+"|"+r.Header.Get("X-Api-Key"))
			mu.Unlock()
			io.WriteString(w, "fine")
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	pinned, other := tlsServer("pinned"), tlsServer("other")
	_, pinnedPort := hostPort(t, pinned.URL)
	_, otherPort := hostPort(t, other.URL)

	ca, err := NewCA("d-test", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	f := start(t, Config{
		Rules: rules(t, "127.0.0.1"), CA: ca, Roots: poolOf(pinned.Certificate(), other.Certificate()),
		Bindings: []Binding{
			// Stored before bindings had ports: the safe default, HTTPS on port 443.
			{Key: "LEGACY_TOKEN", Placeholder: phLegacy, Value: []byte(value), Hosts: []string{"127.0.0.1"}, Headers: []string{"X-Api-Key"}},
			{Key: "PINNED_TOKEN", Placeholder: phPinned, Value: []byte(value), Hosts: []string{"127.0.0.1:" + pinnedPort}},
		},
	}, nil)

	// Plain HTTP to the bound host, in every place the swap would have put the value.
	base := "http://127.0.0.1:" + plainPort
	for _, head := range []string{
		"GET " + base + "/ HTTP/1.1\r\nAuthorization: Bearer " + phLegacy + "\r\n",
		"GET " + base + "/ HTTP/1.1\r\nAuthorization: Basic " + base64.StdEncoding.EncodeToString([]byte("x:"+phLegacy)) + "\r\n",
		"GET " + base + "/ HTTP/1.1\r\nX-Api-Key: " + phLegacy + "\r\n",
		"GET " + base + "/ HTTP/1.1\r\nAuthorization: token " + phPinned + "\r\n",
	} {
		resp, body := rawExchange(t, f.url.Host, head+"Host: 127.0.0.1:"+plainPort+"\r\n\r\n")
		if resp.StatusCode != 403 || !strings.Contains(body, "only inside HTTPS") {
			t.Errorf("%q = %d %q, want 403 naming HTTPS", head, resp.StatusCode, body)
		}
	}
	// A kept-alive plain connection: a clean request passes, the next one with the
	// placeholder is refused.
	c := dialProxy(t, f.url.Host)
	br := bufioReader(c)
	if resp, _ := sendOn(t, c, br, "GET "+base+"/clean HTTP/1.1\r\nHost: 127.0.0.1:"+plainPort+"\r\n\r\n"); resp.StatusCode != 200 {
		t.Fatalf("clean plain request: %d", resp.StatusCode)
	}
	if resp, _ := sendOn(t, c, br, "GET "+base+"/ HTTP/1.1\r\nHost: 127.0.0.1:"+plainPort+"\r\nAuthorization: Bearer "+phLegacy+"\r\n\r\n"); resp.StatusCode != 403 {
		t.Fatalf("kept-alive plain request with the placeholder: %d", resp.StatusCode)
	}
	c.Close()
	got := plain.bytes()
	if strings.Contains(got, value) || strings.Contains(got, "CLEARtext") || strings.Contains(got, "agora-placeholder-") {
		t.Fatalf("the plain host received the secret or a placeholder:\n%s", got)
	}
	if !strings.Contains(got, "GET /clean ") || strings.Count(got, "GET ") != 1 {
		t.Fatalf("the plain host got %q, want only the clean request", got)
	}

	roots := poolFromCA(ca)
	// TLS to the pinned port: swapped.
	tc := tlsThrough(t, f.url.Host, "127.0.0.1:"+pinnedPort, roots)
	resp, body := sendOn(t, tc, bufioReader(tc), "GET / HTTP/1.1\r\nHost: 127.0.0.1:"+pinnedPort+"\r\nAuthorization: Bearer "+phPinned+"\r\nConnection: close\r\n\r\n")
	if resp.StatusCode != 200 || body != "fine" {
		t.Fatalf("TLS to the pinned port: %d %q", resp.StatusCode, body)
	}
	// TLS to another port of the same host: the pinned binding does not go there, nor does
	// the legacy one (port 443 only).
	for _, ph := range []string{phPinned, phLegacy} {
		tc := tlsThrough(t, f.url.Host, "127.0.0.1:"+otherPort, roots)
		resp, body := sendOn(t, tc, bufioReader(tc), "GET / HTTP/1.1\r\nHost: 127.0.0.1:"+otherPort+"\r\nAuthorization: Bearer "+ph+"\r\nConnection: close\r\n\r\n")
		if resp.StatusCode != 403 || !strings.Contains(body, "port") {
			t.Fatalf("TLS to another port with %s: %d %q, want 403 naming the port", ph, resp.StatusCode, body)
		}
	}
	mu.Lock()
	if len(seen["pinned"]) != 1 || seen["pinned"][0] != "Bearer "+value+"|" {
		t.Errorf("the pinned port saw %q, want the swapped value once", seen["pinned"])
	}
	if len(seen["other"]) != 0 {
		t.Errorf("another port of the bound host saw %q, want nothing", seen["other"])
	}
	mu.Unlock()

	f.p.Close()
	denied := f.audit.find(entry.NetRequest, "deny")
	if len(denied) != 7 {
		t.Fatalf("net.request denials = %d, want 7:\n%s", len(denied), f.audit.dump())
	}
	for _, e := range denied[:5] {
		if r, _ := e.details["reason"].(string); !strings.Contains(r, "only inside HTTPS") {
			t.Errorf("a plain refusal is audited with reason %q", r)
		}
	}
	if dump := f.audit.dump(); strings.Contains(dump, value) {
		t.Fatalf("the audit holds the secret:\n%s", dump)
	}
}
