package dispatch_test

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/egress"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// TestRedTeam34_DockerWarmTrustStoreIsTheClaimants: proxy dispatches whose proxy terminates
// TLS (a restricted rule: each has a CA of its own in its trust store) run cold, then claimed
// in a docker slot, then in the slot filled after: each finds a trust store of its own (never
// the template's, never the previous claimant's, never the slot's empty place), and an agent
// that tries to put one of its own there (write, truncate, remove, rename over, a bind mount
// over, unmount) is refused every time and still reaches its granted host through its own CA.
func TestRedTeam34_DockerWarmTrustStoreIsTheClaimants(t *testing.T) {
	e, w := dockerWarmEnv(t, 1)
	ca := newTestCA(t)
	e.d.Egress = egress.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix(upstreamAddr + "/32")}}
	e.d.Resolver = testResolver{}
	e.d.EgressRoots = ca.pem
	port := ca.serveTLS(t, gitServer(t, nil))
	script := `P=` + wire.SystemTrustFile + `
echo "sum=$(sha256sum < $P | cut -c1-64)"
echo EVIL > /tmp/evil
true > $P 2>/dev/null && echo truncate=ok
echo EVIL >> $P 2>/dev/null && echo append=ok
rm -f $P 2>/dev/null && echo rm=ok
mv -f /tmp/evil $P 2>/dev/null && echo mv=ok
mount --bind /tmp/evil $P 2>/dev/null && echo mount=ok
umount $P 2>/dev/null && echo umount=ok
grep -q EVIL $P && echo evil=in-store
git clone -q https://` + upstreamAddr + `:` + port + `/repo.git /tmp/c && cat /tmp/c/README
`
	e.netSubagent("tls", "  - {host: \""+upstreamAddr+"\", port: "+port+", methods: [GET, POST], paths: [/repo.git/]}\n", script)
	req := dispatch.Request{Subagent: "tls", Target: "box", Timeout: 2 * time.Minute}
	sums := map[string]string{}
	for i, name := range []string{"cold", "first claim", "second claim"} {
		if i > 0 {
			waitReady(t, w)
		}
		r := e.run(req)
		wantFinished(t, r)
		out := e.stdout(r)
		sum, _, _ := strings.Cut(strings.TrimPrefix(out, "sum="), "\n")
		if len(sum) != 64 || sum == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
			t.Fatalf("%s: trust store sum %q (empty, or none):\n%s", name, sum, out)
		}
		if prev, ok := sums[sum]; ok {
			t.Fatalf("%s found the trust store %s had (%s)", name, prev, sum)
		}
		sums[sum] = name
		if rest := strings.SplitN(out, "\n", 2)[1]; rest != "hello from upstream\n" {
			t.Fatalf("%s: the agent changed its trust store, or lost its granted host:\n%s\n%s", name, out, e.logs(r.ID))
		}
	}
	if c := boxCounts(w); c.Claimed != 2 || c.Cold != 0 {
		t.Fatalf("counts %+v, want both proxy dispatches claimed in slots", c)
	}
}
