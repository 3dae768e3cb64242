package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// nameProvider is a provider whose gateway URL holds a name, answered by resolve.
func nameProvider(t *testing.T, resolve func(context.Context, string) ([]netip.Addr, error)) (*Provider, *fake.Clientset, *fakeExporter) {
	t.Helper()
	exp := &fakeExporter{}
	o := testOptions(t, exp)
	o.GatewayURL = "https://gw.agents.example:8443"
	o.Resolve = resolve
	cs := fake.NewClientset()
	p, err := newProvider(o, clientsetAPI(cs))
	if err != nil {
		t.Fatal(err)
	}
	return p, cs, exp
}

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

// TestStart_GatewayName: a gateway named by DNS is resolved once at the Job's creation, and
// exactly those addresses are the NetworkPolicy's only peers and the pod's /etc/hosts entries
// for the name.
func TestStart_GatewayName(t *testing.T) {
	calls := 0
	p, cs, _ := nameProvider(t, func(_ context.Context, host string) ([]netip.Addr, error) {
		calls++
		if host != "gw.agents.example" {
			t.Errorf("resolved %q", host)
		}
		// Unsorted, a duplicate and an IPv4-mapped form: the policy gets each address once.
		return addrs("10.2.0.9", "fd00::7", "10.2.0.9", "::ffff:10.1.0.3"), nil
	})
	name := objectName("01JGWNAME")
	if _, err := p.Start(t.Context(), testSpec("01JGWNAME")); err != nil {
		t.Fatal(err)
	}
	if calls != 1 {
		t.Errorf("resolved %d times, want once per Job (the policy and the pod must agree)", calls)
	}
	np, err := cs.NetworkingV1().NetworkPolicies("agents").Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(np.Spec.Egress)
	want := `[{"ports":[{"protocol":"TCP","port":8443}],"to":[{"ipBlock":{"cidr":"10.1.0.3/32"}},{"ipBlock":{"cidr":"10.2.0.9/32"}},{"ipBlock":{"cidr":"fd00::7/128"}}]}]`
	if string(b) != want {
		t.Errorf("policy egress =\n%s\nwant\n%s", b, want)
	}
	job, err := cs.BatchV1().Jobs("agents").Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ = json.Marshal(job.Spec.Template.Spec.HostAliases)
	want = `[{"ip":"10.1.0.3","hostnames":["gw.agents.example"]},{"ip":"10.2.0.9","hostnames":["gw.agents.example"]},{"ip":"fd00::7","hostnames":["gw.agents.example"]}]`
	if string(b) != want {
		t.Errorf("hostAliases =\n%s\nwant\n%s", b, want)
	}
	for _, c := range job.Spec.Template.Spec.InitContainers {
		for _, e := range c.Env {
			if e.Name == "AGORA_GATEWAY_URL" && e.Value != "https://gw.agents.example:8443" {
				t.Errorf("init container's gateway URL %q: want the name, which the certificate names", e.Value)
			}
		}
	}
}

// TestStart_GatewayNameRefused: a name whose answer would open the policy to what a pod must
// not reach (the metadata service, loopback), too many addresses, none, or a failed lookup
// fails the Start before anything is made in the cluster or exported.
func TestStart_GatewayNameRefused(t *testing.T) {
	many := make([]string, maxGatewayAddrs+1)
	for i := range many {
		many[i] = netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}).String()
	}
	for _, tc := range []struct {
		name   string
		answer []netip.Addr
		err    error
		want   string
	}{
		{"metadata service", addrs("10.0.0.1", "169.254.169.254"), nil, "169.254.169.254, which a pod's policy must not admit"},
		{"loopback", addrs("127.0.0.1"), nil, "must not admit"},
		{"ipv6 link-local", addrs("fe80::1"), nil, "must not admit"},
		{"unspecified", addrs("0.0.0.0"), nil, "must not admit"},
		{"none", nil, nil, "resolves to no address"},
		{"too many", addrs(many...), nil, "more than 8"},
		{"lookup fails", nil, errors.New("no such host"), "no such host"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, cs, exp := nameProvider(t, func(context.Context, string) ([]netip.Addr, error) { return tc.answer, tc.err })
			_, err := p.Start(t.Context(), testSpec("01JGWREFUSED"))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Start = %v, want %q", err, tc.want)
			}
			for _, a := range cs.Actions() {
				if a.GetVerb() == "create" {
					t.Errorf("%s %s made before the gateway resolved", a.GetVerb(), a.GetResource().Resource)
				}
			}
			if n := len(exp.allTokens()); n != 0 {
				t.Errorf("%d sessions exported", n)
			}
		})
	}
}

// TestStart_GatewayIPNeedsNoResolver: an IP gateway never asks the resolver, and its pod gets
// no hostAliases.
func TestStart_GatewayIPNeedsNoResolver(t *testing.T) {
	exp := &fakeExporter{}
	o := testOptions(t, exp)
	o.Resolve = func(context.Context, string) ([]netip.Addr, error) {
		t.Error("the resolver was asked for an IP gateway")
		return nil, errors.New("no")
	}
	cs := fake.NewClientset()
	p, err := newProvider(o, clientsetAPI(cs))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Start(t.Context(), testSpec("01JGWIP")); err != nil {
		t.Fatal(err)
	}
	job, err := cs.BatchV1().Jobs("agents").Get(t.Context(), objectName("01JGWIP"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := job.Spec.Template.Spec.HostAliases; len(h) != 0 {
		t.Errorf("hostAliases %v for an IP gateway", h)
	}
}
