package kubernetes

import (
	"testing"

	"k8s.io/client-go/kubernetes/fake"
)

// TestProvider_PoolNameIdentity: two targets of one home that differ only in sandbox_uid,
// gateway_peer or resources make pods or a policy otherwise, so each keeps and claims from a
// pool of its own name (a claim opens the pool named for its own target: it never reaches
// another's pods). A target changed back to its old shape is its old pool again, by name,
// which the holder takes back as agora made it.
func TestProvider_PoolNameIdentity(t *testing.T) {
	spec := warmSpec(t, "TEMPLATE")
	peer := func(pods string) *GatewayPeer {
		return &GatewayPeer{Namespace: "agora", Pods: map[string]string{"app.kubernetes.io/name": pods}}
	}
	opts := testOptions(t, &fakeExporter{})
	name := func(change func(*Options)) string {
		t.Helper()
		o := opts
		if change != nil {
			change(&o)
		}
		p, err := newProvider(o, clientsetAPI(fake.NewClientset()))
		if err != nil {
			t.Fatal(err)
		}
		return p.PoolName(spec, PoolOptions{Home: testHome, Replicas: 1})
	}
	base := name(nil)
	seen := map[string]string{base: "base"}
	for _, tt := range []struct {
		name   string
		change func(*Options)
	}{
		{"sandbox_uid", func(o *Options) { o.SandboxUID = DefaultSandboxUID + 0x01000000 }},
		{"sandbox_uid, another", func(o *Options) { o.SandboxUID = DefaultSandboxUID + 0x02000000 }},
		{"gateway_peer", func(o *Options) { o.GatewayPeer = peer("agora") }},
		{"gateway_peer, other pods", func(o *Options) { o.GatewayPeer = peer("serve") }},
		{"gateway_peer, other namespace", func(o *Options) { o.GatewayPeer = &GatewayPeer{Namespace: "other", Pods: peer("agora").Pods} }},
		{"cpu", func(o *Options) { o.CPU = "250m" }},
		{"memory", func(o *Options) { o.Memory = "512Mi" }},
	} {
		got := name(tt.change)
		if was, ok := seen[got]; ok {
			t.Errorf("%s: pool %s, the name of %s's: want a pool of its own", tt.name, got, was)
		}
		seen[got] = tt.name
		if again := name(tt.change); again != got {
			t.Errorf("%s made twice: pools %s and %s, want one", tt.name, got, again)
		}
	}
	if back := name(nil); back != base {
		t.Errorf("a target changed back to its old shape keeps pool %s, want its old pool %s", back, base)
	}
}
