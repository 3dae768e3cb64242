package kubernetes

import (
	"context"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestCluster_GatewayNameAdmitted: on a real API server (namespace enforcing Pod Security
// "restricted"), a Job whose gateway is a DNS name is made with its pinned hostAliases, and
// its NetworkPolicy with one peer per resolved address is valid.
func TestCluster_GatewayNameAdmitted(t *testing.T) {
	exp := &fakeExporter{}
	p, _ := clusterProvider(t, exp)
	p.opts.GatewayURL = "https://gw.agents.example:8443"
	gw, err := parseGatewayURL(p.opts.GatewayURL)
	if err != nil {
		t.Fatal(err)
	}
	p.gateway = gw
	p.opts.Resolve = func(context.Context, string) ([]netip.Addr, error) {
		return addrs("10.250.0.1", "10.250.0.2", "fd00::1"), nil
	}
	s := testSpec("01JGWNAMECLUSTER")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	h, err := p.Start(ctx, s)
	if err != nil {
		t.Fatalf("Start with a gateway name on a real API server: %v", err)
	}
	name := objectName(s.ID)
	job, err := p.client.BatchV1().Jobs(p.ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := job.Spec.Template.Spec.HostAliases; len(got) != 3 || got[2].IP != "fd00::1" || got[2].Hostnames[0] != "gw.agents.example" {
		t.Errorf("stored hostAliases %+v", got)
	}
	np, err := p.client.NetworkingV1().NetworkPolicies(p.ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if peers := np.Spec.Egress[0].To; len(peers) != 3 || peers[0].IPBlock.CIDR != "10.250.0.1/32" || peers[2].IPBlock.CIDR != "fd00::1/128" {
		t.Errorf("stored policy peers %+v", peers)
	}
	// The pod itself passes admission (restricted) with the aliases.
	spec := *job.Spec.Template.Spec.DeepCopy()
	if _, err := p.client.CoreV1().Pods(p.ns).Create(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "gwname-"}, Spec: spec},
		metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Errorf("the pod with hostAliases is refused: %v", err)
	}
	cancel()
	waitTimeout(t, h, 3*time.Minute)
}
