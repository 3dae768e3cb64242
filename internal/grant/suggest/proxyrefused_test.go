package suggest_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/grant/suggest"
)

// lookalike is a host an agent tries in order to carry data out under a name a person reads
// as a host the work uses.
const lookalike = "api.github.com.exfil.example"

// TestPropose_ProxyRefusedIsNeverProposed: what the egress proxy refused (a connection, a
// request) is listed apart, as the agent tried it and the proxy refused it, and never
// proposed, in a plain dispatch and a learn dispatch alike; what it let through is. Failed
// before: a refused connection was proposed as "connects to HOST:443 (any request)", worded
// like a host the work used, and a refused request as a rule admitting it.
func TestPropose_ProxyRefusedIsNeverProposed(t *testing.T) {
	current := grant.Set{Egress: []grant.EgressRule{{Host: "api.github.com", Port: 443, Methods: []string{"GET"}, Paths: []string{"/repos/acme/"}}}}
	refused := []ent{
		{entry.NetConnect, map[string]any{entry.KeyHost: lookalike, entry.KeyPort: int64(443), entry.KeyDecision: "deny", entry.KeyVia: "connect",
			entry.KeyReason: "not in the dispatch's egress grant"}},
		{entry.NetConnect, map[string]any{entry.KeyHost: "evil.example\x1b[2J\nfake line", entry.KeyPort: int64(443), entry.KeyDecision: "deny", entry.KeyVia: "connect"}},
		// A request on the granted host its rule refuses.
		{entry.NetRequest, netReq("api.github.com", 443, "POST", "/gists")},
	}
	used := []ent{
		{entry.NetConnect, map[string]any{entry.KeyHost: "api.github.com", entry.KeyPort: int64(443), entry.KeyDecision: "allow", entry.KeyVia: "connect", "terminated": true}},
	}
	for _, learn := range []bool{false, true} {
		ents := slices.Concat(refused, used)
		if learn {
			ents = append(ents, learnConn("proxy.golang.org", 443)...)
			ents = append(ents, refused[0]) // twice: counted once
		}
		p := proposeFrom(t, current, true, learn, ents...)
		for _, r := range p.Grant.Egress {
			if r.Host != "api.github.com" && r.Host != "proxy.golang.org" {
				t.Errorf("learn %v: proposed %s, which the proxy refused", learn, r)
			}
			if grant.RequestAllowed([]grant.EgressRule{r}, "api.github.com", 443, "POST", "/gists") {
				t.Errorf("learn %v: proposed %s, admitting the refused POST /gists", learn, r)
			}
		}
		if !grant.RequestAllowed(p.Grant.Egress, "api.github.com", 443, "GET", "/repos/acme/x") {
			t.Errorf("learn %v: egress %v lacks the granted rule the allowed connection kept", learn, p.Grant.Egress)
		}
		if learn != grant.HostGranted(p.Grant.Egress, "proxy.golang.org", 443) {
			t.Errorf("learn %v: egress %v; want the learn host exactly in the learn dispatch", learn, p.Grant.Egress)
		}
		y, err := p.YAML()
		if err != nil {
			t.Fatal(err)
		}
		for _, bad := range []string{"exfil", "evil", "gists"} {
			if strings.Contains(string(y), bad) {
				t.Errorf("learn %v: capability.yaml holds %q:\n%s", learn, bad, y)
			}
		}
		for _, it := range p.Items {
			if strings.Contains(it.Text, "exfil") || strings.Contains(it.Text, "evil") {
				t.Errorf("learn %v: item %q proposes a refused host", learn, it.Text)
			}
		}
		if len(p.ProxyRefused) != 3 {
			t.Fatalf("learn %v: proxy refused %+v, want the lookalike, the hostile name and POST /gists", learn, p.ProxyRefused)
		}
		want := []string{lookalike + ":443", `"evil.example\x1b[2J\nfake line:443"`, "POST api.github.com:443/gists"}
		for i, r := range p.ProxyRefused {
			if r.Item != want[i] || r.Kind != "egress" || !strings.HasPrefix(r.Reason, "the egress proxy refused it") || r.Dispatch != "d1" {
				t.Errorf("learn %v: proxy refused[%d] = %+v, want item %s", learn, i, r, want[i])
			}
			assertASCIIOneLine(t, r.Item+r.Reason)
		}
		if c := p.ProxyRefused[0].Count; c != map[bool]int{false: 1, true: 2}[learn] {
			t.Errorf("learn %v: the lookalike counted %d times", learn, c)
		}
		if learn != strings.Contains(p.ProxyRefused[0].Reason, "egress.learn_hosts") {
			t.Errorf("learn %v: reason %q", learn, p.ProxyRefused[0].Reason)
		}
		if slices.ContainsFunc(p.Refused, func(r suggest.Refusal) bool { return strings.Contains(r.Item, "exfil") }) {
			t.Errorf("learn %v: the proxy's refusal is listed with the other refusals %+v", learn, p.Refused)
		}
	}
}

// TestPropose_OnlyWhatTheProxyAdmitted: an allowed connection is evidence only when the
// dispatch's grant or, in a learn dispatch, egress.learn_hosts (its net.would_deny) admitted
// it; a net.would_deny in a dispatch not in learn mode, or an unknown decision, is no record
// agora makes, and a learn host's failed dial (no would_deny) never reached the host.
func TestPropose_OnlyWhatTheProxyAdmitted(t *testing.T) {
	conn := func(host, decision string) ent {
		return ent{entry.NetConnect, map[string]any{entry.KeyHost: host, entry.KeyPort: int64(443), entry.KeyDecision: decision, entry.KeyVia: "connect"}}
	}
	for _, learn := range []bool{false, true} {
		p := proposeFrom(t, grant.Set{}, true, learn,
			conn("allowed.example", "allow"), // no grant, no would_deny
			conn("failed.example", "error"),  // no grant, no would_deny
			conn("odd.example", "maybe"),
			learnReq("learned.example", 443, "GET", "/x"),
		)
		for _, h := range []string{"allowed.example", "failed.example", "odd.example"} {
			if grant.HostGranted(p.Grant.Egress, h, 443) {
				t.Errorf("learn %v: proposed %s: %v", learn, h, p.Grant.Egress)
			}
			if !slices.ContainsFunc(p.Refused, func(r suggest.Refusal) bool { return strings.HasPrefix(r.Item, h) }) {
				t.Errorf("learn %v: %s is not listed as refused: %+v", learn, h, p.Refused)
			}
		}
		if got := grant.RequestAllowed(p.Grant.Egress, "learned.example", 443, "GET", "/x"); got != learn {
			t.Errorf("learn %v: a net.would_deny request proposed %v (egress %v)", learn, got, p.Grant.Egress)
		}
		if len(p.ProxyRefused) != 0 {
			t.Errorf("learn %v: proxy refused %+v, want none", learn, p.ProxyRefused)
		}
	}
}
