package proxy

import (
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/grant"
)

// TestRedTeam32_LearnHostNeverReachesPrivateAddresses (claude's WebFetch and
// openai's http_fetch alike go through here): a host of egress.learn_hosts is a name whose
// answer the proxy does not control. Learn lets the grant's refusal pass, never the dialer's:
// a learn host resolving to the cloud metadata address, a private network or a loopback
// address not in allow_private is refused, and nothing reaches a server listening there
// (the dialer admits only 127.0.0.1; the server listens on 127.0.0.2, the name points at it),
// each refusal recorded as a refusal.
// A learn host given as an IP literal matches only that literal: another spelling of an
// address (decimal, IPv4-mapped IPv6) is not the learn host.
func TestRedTeam32_LearnHostNeverReachesPrivateAddresses(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Write([]byte("REACHED"))
	}))
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("SKIP: no 127.0.0.2 here: %v", err)
	}
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	_, port := hostPort(t, srv.URL)
	res := resolver{"meta.learn.test": "169.254.169.254", "lan.learn.test": "10.0.0.1", "lo.learn.test": "127.0.0.2", "v6.learn.test": "::ffff:127.0.0.2"}
	hosts := []string{"127.0.0.1:" + port}
	for name := range res {
		hosts = append(hosts, name+":"+port)
	}
	f := start(t, Config{Learn: true, LearnHosts: rules(t, hosts...)}, res)
	for _, target := range []string{"meta.learn.test", "lan.learn.test", "lo.learn.test", "v6.learn.test", "2130706434", "[::ffff:127.0.0.2]", "127.0.0.2", "0x7f.0.0.2"} {
		resp, body := rawExchange(t, f.url.Host, "GET http://"+target+":"+port+"/x HTTP/1.1\r\nHost: "+target+":"+port+"\r\n\r\n")
		if resp.StatusCode == http.StatusOK || strings.Contains(body, "REACHED") {
			t.Errorf("learn request to %s = %d %q, want refused", target, resp.StatusCode, body)
		}
	}
	if hits.Load() != 0 {
		t.Errorf("the server on a private address was reached %d times", hits.Load())
	}
	f.p.Close()
	// Each refusal on record as one, never as allowed nor as a would_deny (which says learn
	// let it through).
	if len(f.audit.find(entry.NetConnect, "allow")) != 0 || len(f.audit.find(entry.NetWouldDeny, "")) != 0 || len(f.audit.find(entry.NetConnect, "deny")) != 8 {
		t.Errorf("audit of 8 refused learn requests:\n%s", f.audit.dump())
	}
}

// TestRedTeam32_LearnedRequestCarryingAPlaceholder: a learned request (the grant refuses it,
// learn lets it through to a learn host over the dispatch's TLS) that carries a secret's
// placeholder anywhere a WebFetch URL can put it (the query, the path, percent-encoded, the
// URL's userinfo, which a client turns into Basic credentials) is refused: the host never
// sees the secret nor the placeholder, whether the secret is bound to that host (a
// grant-refused method on it) or not.
// (Held: the learned requests are refused on the placeholder.)
func TestRedTeam32_LearnedRequestCarryingAPlaceholder(t *testing.T) {
	const ph = "agora-placeholder-ffeeddccbbaa99887766"
	const secret = "ghp_redteam32secretvalue0123456789ab"
	var seen []string
	var mu sync.Mutex
	round := ""
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, round+r.Method+" "+r.URL.String()+" auth="+r.Header.Get("Authorization"))
		mu.Unlock()
		io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	_, port := hostPort(t, srv.URL)
	p, _ := strconv.Atoi(port)
	ca, err := NewCA("d-rt32-learn", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	caPool := x509.NewCertPool()
	caPool.AppendCertsFromPEM(ca.CertPEM())
	for _, bound := range []bool{true, false} {
		cfg := Config{
			Rules:      []grant.EgressRule{{Host: "127.0.0.1", Port: uint16(p), Methods: []string{"GET"}, Paths: []string{"/granted/"}}},
			Learn:      true,
			LearnHosts: rules(t, "127.0.0.1:"+port),
			CA:         ca, Roots: poolOf(srv.Certificate()),
		}
		to := "api.example.invalid:443"
		if bound {
			to = "127.0.0.1:" + port
		}
		cfg.Bindings = []Binding{{Key: "GITHUB_TOKEN", Placeholder: ph, Value: []byte(secret), Hosts: []string{to}}}
		f := start(t, cfg, nil)
		c := f.client(caPool)
		mu.Lock()
		round = fmt.Sprintf("bound=%v: ", bound)
		mu.Unlock()
		host := strings.TrimPrefix(srv.URL, "https://")
		for _, u := range []string{
			"https://" + host + "/learned/control", // no placeholder: learned, reaches the host
			"https://" + host + "/learned?token=" + ph,
			"https://" + host + "/learned/" + ph,
			"https://" + host + "/learned?t=" + url.QueryEscape(strings.ToUpper(ph)),
			"https://" + host + "/learned/%61" + ph[1:],
			"https://x:" + ph + "@" + host + "/learned",
			"https://" + host + "/granted/?token=" + ph, // granted method and path, placeholder in the URL
		} {
			req, err := http.NewRequest(http.MethodGet, u, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := c.Do(req)
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
		f.p.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	for _, b := range []string{"bound=true: ", "bound=false: "} {
		if !slices.Contains(seen, b+"GET /learned/control auth=") {
			t.Fatalf("the learned control request did not reach the host (%s): %q", b, seen)
		}
	}
	for _, s := range seen {
		if strings.Contains(s, secret) || strings.Contains(s, base64.StdEncoding.EncodeToString([]byte("x:"+secret))) {
			t.Errorf("the host saw the secret: %q", s)
		}
		// A placeholder is no secret: the granted GET to the host its secret is bound to
		// may carry it in its URL (only headers are swapped). Nothing learned may, nor a
		// request to a host the secret is not bound to.
		if strings.Contains(strings.ToLower(s), ph[1:]) && !strings.HasPrefix(s, "bound=true: GET /granted/") {
			t.Errorf("the host saw the placeholder: %q", s)
		}
	}
}
