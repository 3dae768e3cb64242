package proxy

import (
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/grant"
)

// TestRedTeam30_LearnNeverSpendsASecretBeyondTheGrant: a host whose grant
// restricts methods and paths, with a secret bound to it, is also in egress.learn_hosts (a
// person wants to learn which of its API calls the agent makes). Learn lets a request the
// grant refuses through, recorded as net.would_deny; but the real secret must not ride on it:
// "secrets stay placeholders" and learn relaxes no secret. A DELETE the grant refuses, sent
// with the placeholder, is refused and the server never sees the secret; the same DELETE
// without the placeholder is learned; a GET the grant allows gets the secret swapped in as
// always. Failed before: the DELETE reached the server carrying the real token.
func TestRedTeam30_LearnNeverSpendsASecretBeyondTheGrant(t *testing.T) {
	const ph = "agora-placeholder-00112233445566778899"
	const secret = "ghp_realsecretvalue0123456789abcdef"
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path+" auth="+r.Header.Get("Authorization"))
		mu.Unlock()
		io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	_, port := hostPort(t, srv.URL)
	p, _ := strconv.Atoi(port)
	ca, err := NewCA("d-learn-secret", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	caPool := x509.NewCertPool()
	caPool.AppendCertsFromPEM(ca.CertPEM())
	cfg := Config{
		Rules:      []grant.EgressRule{{Host: "127.0.0.1", Port: uint16(p), Methods: []string{"GET"}, Paths: []string{"/repos/acme/"}}},
		Learn:      true,
		LearnHosts: rules(t, "127.0.0.1:"+port),
		Bindings:   []Binding{{Key: "GITHUB_TOKEN", Placeholder: ph, Value: []byte(secret), Hosts: []string{"127.0.0.1:" + port}}},
		CA:         ca, Roots: poolOf(srv.Certificate()),
	}
	f := start(t, cfg, nil)
	c := f.client(caPool)
	do := func(method, path string, withSecret bool) int {
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		if withSecret {
			req.Header.Set("Authorization", "Bearer "+ph)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := do("GET", "/repos/acme/app", true); code != 200 {
		t.Fatalf("the granted GET = %d", code)
	}
	if code := do("DELETE", "/repos/acme/app", false); code != 200 {
		t.Fatalf("a learned DELETE without the secret = %d, want it let through", code)
	}
	code := do("DELETE", "/repos/acme/app", true)
	f.p.Close()
	mu.Lock()
	defer mu.Unlock()
	for _, s := range seen {
		if strings.HasPrefix(s, "DELETE") && strings.Contains(s, secret) {
			t.Errorf("a request the grant refuses carried the real secret to the host (status %d): %q", code, s)
		}
	}
	if len(seen) == 0 || seen[0] != "GET /repos/acme/app auth=Bearer "+secret {
		t.Errorf("the granted request: %q", seen)
	}
	if code == 200 {
		t.Errorf("the DELETE with the placeholder = 200, want it refused")
	}
	if d := f.audit.find(entry.NetRequest, "deny"); len(d) != 1 {
		t.Errorf("the refused DELETE's net.request deny entries = %d:\n%s", len(d), f.audit.dump())
	}
}
