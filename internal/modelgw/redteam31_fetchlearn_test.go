package modelgw

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/egress"
	"github.com/agora-dev/agora/internal/grant"
)

// TestRedTeam31_FetchLearnRedirectChainsAndWildcards (learn): the gateway's
// http_fetch in a learn dispatch, with egress.learn_hosts "*.learn.test" (a wildcard) and
// the grant "granted.test". Attacks: a redirect chain granted -> learn -> granted -> a host
// outside both (each hop judged again: the last refused, nothing sent to it); a chain that
// leaves through a learn host's redirect to userinfo, to an IP literal, to another scheme;
// wildcard edges (the apex learn.test, evil-learn.test, learn.test.evil.test, a trailing
// dot, a host ending in the suffix without a dot) refused and never sent. What the learn
// host admits is learned with its own would_deny per hop; nothing else is.
func TestRedTeam31_FetchLearnRedirectChainsAndWildcards(t *testing.T) {
	var mu sync.Mutex
	var seen []string // Host of every request the upstream got
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Host+r.URL.Path)
		mu.Unlock()
		if to := r.URL.Query().Get("to"); to != "" {
			http.Redirect(w, r, to, http.StatusFound)
			return
		}
		fmt.Fprint(w, "ok")
	})
	port := up.URL[strings.LastIndex(up.URL, ":")+1:]
	// Every name resolves to the upstream (so a refusal is the gateway's, never a lookup's),
	// but r.learn.test to a private address, as a rebinding name would.
	dialer := egress.NewDialer(egress.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}, anyResolver{"r.learn.test": "10.0.0.1"})
	h := start(t, Config{Egress: grant.MustEgressRules("granted.test"), Learn: true, LearnHosts: grant.MustEgressRules("*.learn.test"), Dialer: dialer})
	sent := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
	at := func(host, path string) string { return "http://" + host + ":" + port + path }
	chain := func(hops ...string) string {
		// hops[0] redirects to hops[1], and so on; each hop's URL carries the rest.
		u := hops[len(hops)-1]
		for i := len(hops) - 2; i >= 0; i-- {
			u = hops[i] + "?to=" + strings.NewReplacer("%", "%25", "&", "%26", "?", "%3F", "=", "%3D").Replace(u)
		}
		return u
	}
	wouldDeny := func() int { return len(h.audit.ofKind(entry.NetWouldDeny)) }

	// A chain through the grant and a learn host to a host outside both: refused at the last hop.
	before, beforeDeny := len(sent()), wouldDeny()
	status, _, msg := h.fetch(t, fmt.Sprintf(`{"url":%q}`, chain(at("granted.test", "/a"), at("x.learn.test", "/b"), at("granted.test", "/c"), at("evil.test", "/d"))))
	if status != http.StatusForbidden || !strings.Contains(msg, "not granted") {
		t.Errorf("chain out of the learn hosts: %d %q, want 403 not granted", status, msg)
	}
	for _, s := range sent()[before:] {
		if strings.HasPrefix(s, "evil.test") {
			t.Errorf("the host outside learn_hosts got %q", s)
		}
	}
	if got := wouldDeny() - beforeDeny; got != 1 {
		t.Errorf("chain: %d net.would_deny, want 1 (x.learn.test's hop only)", got)
	}

	for name, url := range map[string]string{
		"apex of the wildcard":         at("learn.test", "/x"),
		"a name ending in the suffix":  at("evil-learn.test", "/x"),
		"the suffix inside a name":     at("learn.test.evil.test", "/x"),
		"a trailing dot":               at("x.learn.test.", "/x"),
		"learn host to userinfo":       chain(at("x.learn.test", "/u"), "http://user:pw@y.learn.test:"+port+"/x"),
		"learn host to an IP literal":  chain(at("x.learn.test", "/i"), at("127.0.0.1", "/x")),
		"learn host to another scheme": chain(at("x.learn.test", "/s"), "ftp://y.learn.test/x"),
		"learn host, private address":  at("r.learn.test", "/x"),
		"learn host to a private one":  chain(at("x.learn.test", "/p"), at("r.learn.test", "/x")),
	} {
		before := len(sent())
		status, _, msg := h.fetch(t, fmt.Sprintf(`{"url":%q}`, url))
		if status == http.StatusOK {
			t.Errorf("%s: fetched (%q), want refused", name, msg)
		}
		for _, s := range sent()[before:] {
			if !strings.HasPrefix(s, "x.learn.test:") {
				t.Errorf("%s: sent %q", name, s)
			}
		}
	}
	// What the wildcard does admit is learned, in any letter case.
	before = wouldDeny()
	if status, _, msg := h.fetch(t, fmt.Sprintf(`{"url":%q}`, at("A.B.LEARN.TEST", "/ok"))); status != http.StatusOK {
		t.Errorf("a name under the wildcard: %d %q, want fetched", status, msg)
	}
	if wouldDeny() != before+1 {
		t.Errorf("a name under the wildcard: %d net.would_deny, want 1", wouldDeny()-before)
	}
}

// anyResolver resolves every name to 127.0.0.1 but those it names.
type anyResolver map[string]string

func (m anyResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if ip, ok := m[host]; ok {
		return []netip.Addr{netip.MustParseAddr(ip)}, nil
	}
	return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
}
