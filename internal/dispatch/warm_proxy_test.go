package dispatch_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/egress"
)

// TestWarm_ProxyDispatchRunsInSlot: on bubblewrap too, a dispatch with the egress proxy runs
// claimed in a warm slot (its stage's trust file, bound over the system trust store outside
// /agora, has a per-dispatch source: as a fixed bind of the shape it would make every such
// dispatch spend its slot and start cold). Claimed, it finds exactly what the cold one
// finds: its own trust store, read-only; no proxy password; the granted clone done and the
// other refused, both in its record's net counts and stderr. A dispatch without the proxy
// then misses the proxy-shaped slot before anything is attached, and starts cold, counted.
func TestWarm_ProxyDispatchRunsInSlot(t *testing.T) {
	requireTool(t, "git")
	e, w := warmEnv(t, 1)
	ca := newTestCA(t)
	e.d.Egress = egress.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix(upstreamAddr + "/32")}}
	e.d.Resolver = testResolver{}
	e.d.EgressRoots = ca.pem
	port := ca.serveTLS(t, gitServer(t, nil))
	allowed := "https://" + upstreamAddr + ":" + port + "/repo.git"
	caLine := strings.Split(string(ca.pem), "\n")[1]
	e.netSubagent("fetcher", "  - \""+upstreamAddr+":"+port+"\"\n", proxyProbe(allowed, "https://evil.example/repo.git", caLine))
	e.netSubagent("plain", "", `echo plain`)
	cold := e.run(dispatch.Request{Subagent: "fetcher"})
	wantFinished(t, cold)
	waitWarmReady(t, w, 1)
	hot := e.run(dispatch.Request{Subagent: "fetcher"})
	wantFinished(t, hot)
	if c := warmCounts(w); c.Claimed != 1 || c.Cold != 0 {
		t.Fatalf("counts %+v, want the proxy dispatch claimed, none cold", c)
	}
	co, ho := e.stdout(cold), e.stdout(hot)
	t.Logf("cold:\n%s\nwarm:\n%s", co, ho)
	if co != ho {
		t.Errorf("the warm proxy dispatch found otherwise than the cold one")
	}
	for _, want := range []string{"systrust mount=ro", "systrust=has-ca", "systrust-write=refused", "proxytoken=0",
		"hello from upstream", "refused-exit=128"} {
		if !strings.Contains(ho, want+"\n") {
			t.Errorf("warm output lacks %q", want)
		}
	}
	for _, r := range []*dispatch.Record{cold, hot} {
		if !strings.Contains(e.logs(r.ID), "agora refused the connection to evil.example:443") {
			t.Errorf("dispatch %s: stderr lacks the refusal:\n%s", r.ID, e.logs(r.ID))
		}
		if r.Net == nil || r.Net.Reached[upstreamAddr+":"+port] == 0 || r.Net.Refused["evil.example:443"] == 0 {
			t.Errorf("dispatch %s: net %+v", r.ID, r.Net)
		}
	}
	waitWarmReady(t, w, 1)
	p := e.run(dispatch.Request{Subagent: "plain"})
	wantFinished(t, p)
	if c := warmCounts(w); c.Claimed != 2 || c.Cold != 1 || e.stdout(p) != "plain\n" {
		t.Fatalf("a plain dispatch claiming a proxy slot: counts %+v (want claimed 2, cold 1), stdout %q", c, e.stdout(p))
	}
}
