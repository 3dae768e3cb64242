package config_test

import (
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/config"
)

// TestTarget_GatewayPeer: gateway_peer names serve's pods by namespace AND labels; a peer
// missing either (it would admit a whole namespace, or a label anyone may wear elsewhere) is
// refused, and so is one on a target that makes no NetworkPolicy.
func TestTarget_GatewayPeer(t *testing.T) {
	c := config.Default("/h")
	if err := config.Parse("agora.yaml", []byte(k8sPullFile("    gateway_peer: {namespace: agora, pods: {app: agora}}\n")), c); err != nil {
		t.Fatal(err)
	}
	k, _ := c.Target("k")
	if k.GatewayPeer == nil || k.GatewayPeer.Namespace != "agora" || k.GatewayPeer.Pods["app"] != "agora" {
		t.Errorf("gateway_peer = %+v", k.GatewayPeer)
	}
	for name, tt := range map[string]struct{ yaml, want string }{
		"no labels":    {"    gateway_peer: {namespace: agora}\n", "pods: want the labels of serve's pods"},
		"empty labels": {"    gateway_peer: {namespace: agora, pods: {}}\n", "would admit every pod of namespace agora"},
		"no namespace": {"    gateway_peer: {pods: {app: agora}}\n", "namespace: want the namespace serve's pods run in"},
		"bad":          {"    gateway_peer: {namespace: Agora, pods: {app: agora}}\n", `got "Agora"`},
		"many labels":  {"    gateway_peer: {namespace: agora, pods: {l0: x, l1: x, l2: x, l3: x, l4: x, l5: x, l6: x, l7: x, l8: x, l9: x, l10: x, l11: x, l12: x, l13: x, l14: x, l15: x, l16: x}}\n", "17 labels; at most 16"},
	} {
		err := config.Parse("agora.yaml", []byte(k8sPullFile(tt.yaml)), config.Default("/h"))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Parse = %v, want %q", name, err, tt.want)
		}
	}
	err := config.Parse("agora.yaml", []byte("targets:\n  d:\n    provider: docker\n    image: box"+digest+"\n    gateway_peer: {namespace: agora, pods: {app: agora}}\n"), config.Default("/h"))
	if err == nil || !strings.Contains(err.Error(), "gateway_peer: not a setting of provider docker") {
		t.Errorf("docker target with gateway_peer: %v", err)
	}
}
