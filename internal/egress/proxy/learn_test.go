package proxy

import (
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit/entry"
)

// learnServers are a TLS host a learn dispatch may reach (in LearnHosts, not granted) and a
// plain host it may not (in neither), each counting the requests it got.
func learnServers(t *testing.T) (learnTLS *httptest.Server, other *httptest.Server, hitsLearn, hitsOther *atomic.Int64) {
	hitsLearn, hitsOther = &atomic.Int64{}, &atomic.Int64{}
	learnTLS = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hitsLearn.Add(1)
		io.WriteString(w, "learned "+r.Method+" "+r.URL.Path+" auth="+r.Header.Get("Authorization"))
	}))
	other = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hitsOther.Add(1)
		io.WriteString(w, "reached")
	}))
	t.Cleanup(learnTLS.Close)
	t.Cleanup(other.Close)
	return
}

// TestLearn_HostOutsideGrantInLearnHosts: a learn proxy lets a host of LearnHosts through
// that the grant refuses, recording net.would_deny with method and path before each request
// (it terminates TLS with the dispatch's CA); a host outside LearnHosts stays refused, never
// recorded as allowed nor as would_deny; without Learn, LearnHosts open nothing.
// Failed before: Config had no Learn, and the learn host was refused.
func TestLearn_HostOutsideGrantInLearnHosts(t *testing.T) {
	srv, other, hits, otherHits := learnServers(t)
	_, port := hostPort(t, srv.URL)
	_, otherPort := hostPort(t, other.URL)
	ca, err := NewCA("d-learn", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	caPool := x509.NewCertPool()
	caPool.AppendCertsFromPEM(ca.CertPEM())
	cfg := Config{Rules: rules(t, "example.invalid"), Learn: true, LearnHosts: rules(t, "127.0.0.1:"+port), CA: ca, Roots: poolOf(srv.Certificate())}
	f := start(t, cfg, nil)
	c := f.client(caPool)
	resp, err := c.Post(srv.URL+"/repos/x", "text/plain", strings.NewReader("hi"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "learned POST /repos/x auth=" {
		t.Fatalf("learn host = %d %q", resp.StatusCode, body)
	}
	resp, err = c.Get(other.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || otherHits.Load() != 0 {
		t.Fatalf("a host outside learn_hosts = %d, hits %d", resp.StatusCode, otherHits.Load())
	}
	f.p.Close()
	would := f.audit.find(entry.NetWouldDeny, "")
	if len(would) != 2 {
		t.Fatalf("net.would_deny entries = %d, want the connection and the request:\n%s", len(would), f.audit.dump())
	}
	conn, _ := entry.ReadWouldDeny(entry.NetWouldDeny, would[0].details)
	req, _ := entry.ReadWouldDeny(entry.NetWouldDeny, would[1].details)
	if conn.Host != "127.0.0.1" || conn.Port != port || conn.Method != "" || conn.Reason == "" {
		t.Errorf("connection would_deny = %+v", conn)
	}
	if req.Method != "POST" || req.Path != "/repos/x" || req.Port != port || !strings.Contains(req.Reason, "grant does not allow") {
		t.Errorf("request would_deny = %+v", req)
	}
	for _, e := range f.audit.find(entry.NetConnect, "allow") {
		if e.details[entry.KeyPort] == mustAtoi(t, otherPort) {
			t.Errorf("the host outside learn_hosts was recorded allowed: %v", e.details)
		}
	}
	if d := f.audit.find(entry.NetConnect, "deny"); len(d) != 1 {
		t.Errorf("the refused host's net.connect deny entries = %d:\n%s", len(d), f.audit.dump())
	}
	if hits.Load() != 1 {
		t.Errorf("learn host hits = %d", hits.Load())
	}

	// Without Learn the same LearnHosts open nothing.
	cfg.Learn = false
	g := start(t, cfg, nil)
	resp, err = g.client(caPool).Get(srv.URL + "/")
	if err == nil {
		resp.Body.Close()
		t.Fatalf("without learn the learn host = %d, want refused", resp.StatusCode)
	}
	if hits.Load() != 1 || len(g.audit.find(entry.NetWouldDeny, "")) != 0 {
		t.Fatalf("without learn: hits %d, audit:\n%s", hits.Load(), g.audit.dump())
	}
}

// TestLearn_PlainAndPlaceholderStayRefused: plain HTTP to a learn host is recorded with its
// method and path; a secret's placeholder sent to a learn host is refused (secrets stay
// placeholders), as is a Host header naming another host.
func TestLearn_PlainAndPlaceholderStayRefused(t *testing.T) {
	const ph = "agora-placeholder-00112233445566778899"
	_, other, _, hits := learnServers(t)
	_, port := hostPort(t, other.URL)
	f := start(t, Config{Learn: true, LearnHosts: rules(t, "127.0.0.1:"+port),
		Bindings: []Binding{{Key: "GITHUB_TOKEN", Placeholder: ph, Value: []byte("ghp_secretvalue0123456789abcdef"), Hosts: []string{"api.github.com:443"}}}}, nil)
	base := "http://127.0.0.1:" + port
	resp, body := rawExchange(t, f.url.Host, "DELETE "+base+"/a/b HTTP/1.1\r\nHost: 127.0.0.1:"+port+"\r\nContent-Length: 0\r\n\r\n")
	if resp.StatusCode != 200 || body != "reached" {
		t.Fatalf("plain learn request = %d %q", resp.StatusCode, body)
	}
	resp, body = rawExchange(t, f.url.Host, "GET "+base+"/x HTTP/1.1\r\nHost: 127.0.0.1:"+port+"\r\nAuthorization: Bearer "+ph+"\r\n\r\n")
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "placeholder") {
		t.Fatalf("a placeholder to a learn host = %d %q", resp.StatusCode, body)
	}
	if hits.Load() != 1 {
		t.Fatalf("host hits = %d, want only the first request", hits.Load())
	}
	f.p.Close()
	var methods []string
	for _, e := range f.audit.find(entry.NetWouldDeny, "") {
		w, _ := entry.ReadWouldDeny(entry.NetWouldDeny, e.details)
		methods = append(methods, w.Method+" "+w.Path)
	}
	if strings.Join(methods, ",") != " ,DELETE /a/b" {
		t.Errorf("would_deny method/path = %q:\n%s", methods, f.audit.dump())
	}
	if d := f.audit.find(entry.NetRequest, "deny"); len(d) != 1 {
		t.Errorf("net.request deny = %d:\n%s", len(d), f.audit.dump())
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}
