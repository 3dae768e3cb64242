package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestGatewayPeer_OnePeerBothSelectors: with gateway_peer, the policy admits, besides the
// pinned addresses, exactly serve's pods: one peer holding the namespace (by the name label the
// apiserver sets, which no one else can set) AND the pods' labels. Two peers, one per
// selector, would admit every pod of agora's namespace, or pods wearing agora's labels in any
// namespace (an attacker's own): an attacker's first try.
func TestGatewayPeer_OnePeerBothSelectors(t *testing.T) {
	p, _ := testProvider(t, &fakeExporter{})
	gw := p.gateway
	var err error
	if gw.peer, err = checkPeer(&GatewayPeer{Namespace: "agora", Pods: map[string]string{"app": "agora"}}); err != nil {
		t.Fatal(err)
	}
	np := networkPolicyObject("agents", "agora-x", "X", gw)
	b, _ := json.Marshal(np.Spec.Egress)
	want := `[{"ports":[{"protocol":"TCP","port":8443}],"to":[{"ipBlock":{"cidr":"10.250.0.1/32"}},` +
		`{"podSelector":{"matchLabels":{"app":"agora"}},"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"agora"}}}]}]`
	if string(b) != want {
		t.Errorf("egress =\n%s\nwant\n%s", b, want)
	}
	// The policy holds its own copy: a caller changing its map later changes no policy.
	in := map[string]string{"app": "agora"}
	peer, _ := checkPeer(&GatewayPeer{Namespace: "agora", Pods: in})
	in["app"] = ""
	if peer.Pods["app"] != "agora" {
		t.Error("checkPeer kept the caller's map")
	}
}

func TestGatewayPeer_Refused(t *testing.T) {
	for _, tt := range []struct {
		peer GatewayPeer
		want string
	}{
		{GatewayPeer{Namespace: "agora"}, "would admit every pod"},
		{GatewayPeer{Namespace: "agora", Pods: map[string]string{}}, "would admit every pod"},
		{GatewayPeer{Pods: map[string]string{"app": "agora"}}, "namespace"},
		{GatewayPeer{Namespace: "Agora", Pods: map[string]string{"app": "agora"}}, "namespace"},
		{GatewayPeer{Namespace: "agora", Pods: map[string]string{"app agora": "x"}}, "label"},
		{GatewayPeer{Namespace: "agora", Pods: map[string]string{"app": "a b"}}, "label"},
		{GatewayPeer{Namespace: "agora", Pods: manyLabels(17)}, "at most 16"},
		// Labels agora's own dispatch pods wear select them, not serve's.
		{GatewayPeer{Namespace: "agora", Pods: map[string]string{"app.kubernetes.io/managed-by": "agora"}}, "dispatch pods"},
		{GatewayPeer{Namespace: "agora", Pods: map[string]string{"app.kubernetes.io/managed-by": "agora", "agora.slot": "s1"}}, "dispatch pods"},
		{GatewayPeer{Namespace: "agora", Pods: map[string]string{"batch.kubernetes.io/job-name": "agora-x", "job-name": "agora-x"}}, "dispatch pods"},
		{GatewayPeer{Namespace: "agora", Pods: map[string]string{"agora.dispatch": "01J"}}, "dispatch pods"},
	} {
		if _, err := checkPeer(&tt.peer); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("checkPeer(%+v) = %v, want an error naming %q", tt.peer, err, tt.want)
		}
	}
	if p, err := checkPeer(nil); p != nil || err != nil {
		t.Errorf("no peer: %v, %v", p, err)
	}
	// A label serve's pods have and dispatch pods never do makes the selector serve's.
	if _, err := checkPeer(&GatewayPeer{Namespace: "agora", Pods: map[string]string{"app.kubernetes.io/managed-by": "agora", "app": "agora"}}); err != nil {
		t.Errorf("a peer with serve's own label: %v", err)
	}
}

// TestRedTeam38_DispatchPodLabelsCoverAgoras: every label agora puts on a dispatch's Job, its
// pod template and a warm slot is one dispatchPodLabels knows, so a peer made only of them is
// refused whatever agora adds later.
func TestRedTeam38_DispatchPodLabelsCoverAgoras(t *testing.T) {
	l := labels("01JX")
	l[labelSlot], l[labelHome] = "s", "h"
	for k, v := range l {
		if !dispatchPodLabels(map[string]string{k: v}) {
			t.Errorf("label %s=%s of a dispatch pod is not known to dispatchPodLabels", k, v)
		}
	}
}

// TestCluster_GatewayPeerAdmitted: on a real API server, a Job of a target with a gateway
// peer and a gateway at a Service name (its ClusterIP pinned as for any name) gets the
// policy, which the API server stores as made: the peer's two selectors in one peer.
func TestCluster_GatewayPeerAdmitted(t *testing.T) {
	p, _ := clusterProvider(t, &fakeExporter{})
	gw, err := parseGatewayURL("https://agora-gateway.agora.svc.cluster.local:8443")
	if err != nil {
		t.Fatal(err)
	}
	if gw.peer, err = checkPeer(&GatewayPeer{Namespace: "agora", Pods: map[string]string{"app": "agora"}}); err != nil {
		t.Fatal(err)
	}
	p.gateway = gw
	p.opts.Resolve = func(context.Context, string) ([]netip.Addr, error) { return addrs("10.96.0.80"), nil }
	s := testSpec("01JGWPEERCLUSTER")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	h, err := p.Start(ctx, s)
	if err != nil {
		t.Fatalf("Start with a gateway peer on a real API server: %v", err)
	}
	np, err := p.client.NetworkingV1().NetworkPolicies(p.ns).Get(t.Context(), objectName(s.ID), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	peers := np.Spec.Egress[0].To
	if len(peers) != 2 || peers[0].IPBlock == nil || peers[0].IPBlock.CIDR != "10.96.0.80/32" ||
		peers[1].NamespaceSelector == nil || peers[1].PodSelector == nil || peers[1].IPBlock != nil ||
		peers[1].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "agora" || peers[1].PodSelector.MatchLabels["app"] != "agora" {
		t.Errorf("stored policy peers %+v", peers)
	}
	cancel()
	waitTimeout(t, h, 3*time.Minute)
}

func manyLabels(n int) map[string]string {
	m := map[string]string{}
	for i := range n {
		m[fmt.Sprintf("l%d", i)] = "x"
	}
	return m
}
