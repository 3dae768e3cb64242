package proxy

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agora-dev/agora/internal/audit/entry"
)

// TestRedTeam32_LearnHostNeverReachesPrivateAddresses (#30 learn, claude's WebFetch and
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
