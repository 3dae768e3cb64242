package dispatch_test

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/agora-dev/agora/internal/compute/container"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/egress"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// proxyProbe is what a proxy dispatch's agent finds of its egress and trust: the system trust
// store (the dispatch's own, bound read-only over the image's), whether its environment holds
// the proxy's password, an allowed clone and a refused one.
func proxyProbe(allowed, refused, caLine string) string {
	return `
t=` + wire.SystemTrustFile + `
echo "systrust mount=$(awk -v m=$t '$5==m {split($6,o,","); print o[1]}' /proc/self/mountinfo)"
grep -qF '` + caLine + `' $t && echo systrust=has-ca || echo systrust=lacks-ca
echo "systrust certs=$(grep -c 'BEGIN CERTIFICATE' $t)"
chmod u+w $t 2>/dev/null; echo x >> $t 2>/dev/null && echo systrust-write=ok || echo systrust-write=refused
echo "proxytoken=$(env | grep -c '^` + wire.ProxyTokenEnv + `=')"
git clone -q ` + allowed + ` /tmp/c && cat /tmp/c/README
git clone -q ` + refused + ` /tmp/d; echo "refused-exit=$?"
`
}

// waitReady waits for target box's pool to hold a ready slot.
func waitReady(t *testing.T, w *dispatch.WarmPools) {
	t.Helper()
	for deadline := time.Now().Add(90 * time.Second); boxCounts(w).Ready < 1; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("docker warm slots: %+v, want 1 ready", boxCounts(w))
		}
	}
}

// TestDockerWarm_ProxyDispatchRunsInSlot: a dispatch with the egress proxy (a grant with a
// host) runs claimed in a docker slot (the bind of its stage's trust file over the system
// trust store has a per-dispatch path: as part of the slot's shape it would make every such
// dispatch spend its slot and start cold). Claimed, it clones from the granted host through
// the proxy and is refused another exactly as the cold dispatch is: the same output, the same
// refusal in its stderr, the same net counts in its record, both decisions audited; the
// isolation probe finds no difference but the ones a slot always has (slotDifferences); the
// system trust store is the dispatch's own, read-only. No environment holds the proxy's
// password: a docker dispatch's sandbox has none to hold (only sandbox: none dispatches do).
func TestDockerWarm_ProxyDispatchRunsInSlot(t *testing.T) {
	e, w := dockerWarmEnv(t, 1)
	ca := newTestCA(t)
	e.d.Egress = egress.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix(upstreamAddr + "/32")}}
	e.d.Resolver = testResolver{}
	e.d.EgressRoots = ca.pem
	port := ca.serveTLS(t, gitServer(t, nil))
	allowed := "https://" + upstreamAddr + ":" + port + "/repo.git"
	caLine := strings.Split(string(ca.pem), "\n")[1]
	e.netSubagent("fetcher", "  - \""+upstreamAddr+":"+port+"\"\n", isolationProbe+proxyProbe(allowed, "https://evil.example/repo.git", caLine))
	req := dispatch.Request{Subagent: "fetcher", Repo: gitRepo(t, map[string]string{"README": "one\n"}), Target: "box", Timeout: 2 * time.Minute}
	cold := e.run(req)
	wantFinished(t, cold)
	waitReady(t, w)
	// Before the claim: the slot container's configuration holds no password.
	noProxyTokenInSlots(t, e)
	hot := e.run(req)
	wantFinished(t, hot)
	if c := boxCounts(w); c.Claimed != 1 || c.Cold != 0 {
		t.Fatalf("counts %+v, want the proxy dispatch claimed in the slot, none cold", c)
	}
	co, ho := e.stdout(cold), e.stdout(hot)
	t.Logf("cold:\n%s\nwarm:\n%s", co, ho)
	for _, want := range []string{"systrust mount=ro", "systrust=has-ca", "systrust-write=refused", "proxytoken=0",
		"hello from upstream", "refused-exit=128"} {
		if !strings.Contains(ho, want+"\n") {
			t.Errorf("warm output lacks %q", want)
		}
	}
	cl, hl := strings.Split(co, "\n"), strings.Split(ho, "\n")
	if len(cl) != len(hl) {
		t.Fatalf("probe lines: cold %d, warm %d", len(cl), len(hl))
	}
	for i := range cl {
		if cl[i] != hl[i] && slotDifferences[cl[i]] == "" {
			t.Errorf("probe line %d: cold %q, warm %q", i, cl[i], hl[i])
		}
	}
	dump := e.auditDump()
	for _, r := range []*dispatch.Record{cold, hot} {
		if !strings.Contains(e.logs(r.ID), "agora refused the connection to evil.example:443") {
			t.Errorf("dispatch %s: stderr lacks the refusal:\n%s", r.ID, e.logs(r.ID))
		}
		if r.Network != dispatch.NetworkProxy || r.Net == nil || r.Net.Reached[upstreamAddr+":"+port] == 0 || r.Net.Refused["evil.example:443"] == 0 {
			t.Errorf("dispatch %s: network %s, net %+v", r.ID, r.Network, r.Net)
		}
		if !strings.Contains(dump, `dispatch/`+r.ID+` fetcher@`) {
			t.Errorf("audit lacks dispatch %s's egress", r.ID)
		}
	}
	if cold.Isolation != hot.Isolation {
		t.Errorf("isolation: cold %q, warm %q", cold.Isolation, hot.Isolation)
	}
}

// TestDockerWarm_ProxyShapeMismatchRefusedBeforeBind: a slot of a proxy dispatch's shape is
// never bound to a dispatch without the proxy, nor the reverse: the shapes differ (the system
// trust store's place), the claim is refused before the bind, the slot is spent and the
// dispatch starts cold, counted, and ends as it would have.
func TestDockerWarm_ProxyShapeMismatchRefusedBeforeBind(t *testing.T) {
	e, w := dockerWarmEnv(t, 1)
	ca := newTestCA(t)
	e.d.Egress = egress.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix(upstreamAddr + "/32")}}
	e.d.Resolver = testResolver{}
	e.d.EgressRoots = ca.pem
	port := ca.serveTLS(t, gitServer(t, nil))
	script := `[ -d /agora/gateway ] && echo gw=yes; env | grep -c '^HTTPS_PROXY=' || true`
	e.netSubagent("proxied", "  - \""+upstreamAddr+":"+port+"\"\n", script)
	e.netSubagent("plain", "", script)
	proxied := dispatch.Request{Subagent: "proxied", Target: "box", Timeout: 2 * time.Minute}
	plain := dispatch.Request{Subagent: "plain", Target: "box", Timeout: 2 * time.Minute}
	wantFinished(t, e.run(proxied)) // cold: the template is a proxy dispatch's
	waitReady(t, w)
	r := e.run(plain)
	wantFinished(t, r)
	if c := boxCounts(w); c.Claimed != 1 || c.Cold != 1 {
		t.Fatalf("counts %+v after a plain dispatch claimed a proxy slot, want claimed 1, cold 1", c)
	}
	if r.Network == dispatch.NetworkProxy || strings.Contains(e.stdout(r), "gw=yes") {
		t.Errorf("the plain dispatch ran with the proxy: %s %q", r.Network, e.stdout(r))
	}
	// Its cold start taught the pool the plain shape; the proxy dispatch now misses.
	waitReady(t, w)
	r = e.run(proxied)
	wantFinished(t, r)
	if c := boxCounts(w); c.Claimed != 2 || c.Cold != 2 {
		t.Fatalf("counts %+v after a proxy dispatch claimed a plain slot, want claimed 2, cold 2", c)
	}
	if r.Network != dispatch.NetworkProxy || !strings.Contains(e.stdout(r), "gw=yes\n1\n") {
		t.Errorf("the proxy dispatch ran without its proxy: %s %q", r.Network, e.stdout(r))
	}
}

// noProxyTokenInSlots fails when a slot container of e's home has the proxy's password
// variable in its configuration.
func noProxyTokenInSlots(t *testing.T, e *env) {
	t.Helper()
	cli, err := client.New(client.WithHost(containerHost()), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	res, err := cli.ContainerList(t.Context(), client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", container.LabelHome+"="+container.HomeLabel(e.home.Dir))})
	if err != nil || len(res.Items) == 0 {
		t.Fatalf("slot containers: %v, %v", res.Items, err)
	}
	for _, it := range res.Items {
		in, err := cli.ContainerInspect(t.Context(), it.ID, client.ContainerInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range in.Container.Config.Env {
			if strings.HasPrefix(kv, wire.ProxyTokenEnv+"=") {
				t.Errorf("slot container %s holds %s", it.ID, wire.ProxyTokenEnv)
			}
		}
	}
}
