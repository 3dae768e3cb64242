package config

import (
	"strings"
	"testing"
	"time"
)

func TestParse_Leader(t *testing.T) {
	for _, c := range []struct {
		name, yaml, err string
	}{
		{"full", "leader: {lease: agora-leader, namespace: agora, kubeconfig: /etc/kc, identity: agora-0, duration: 15s}\n", ""},
		{"in-cluster", "leader: {lease: agora.leader, namespace: agora}\n", ""},
		{"no namespace", "leader: {lease: agora-leader}\n", "leader.namespace"},
		{"no lease", "leader: {namespace: agora}\n", "leader.lease"},
		{"only identity", "leader: {identity: agora-0}\n", "lease and namespace are required"},
		{"bad lease", "leader: {lease: Agora_Leader, namespace: agora}\n", "leader.lease"},
		{"bad namespace", "leader: {lease: l, namespace: a.b}\n", "leader.namespace"},
		{"identity with a space", "leader: {lease: l, namespace: a, identity: \"a b\"}\n", "leader.identity"},
		{"identity with a quote", "leader: {lease: l, namespace: a, identity: \"a\\\"\"}\n", "leader.identity"},
		{"short duration", "leader: {lease: l, namespace: a, duration: 1s}\n", "2s to 5m"},
		{"long duration", "leader: {lease: l, namespace: a, duration: 1h}\n", "2s to 5m"},
		{"relative kubeconfig", "leader: {lease: l, namespace: a, kubeconfig: kc}\n", "leader.kubeconfig"},
		{"unknown key", "leader: {lease: l, namespace: a, ttl: 3s}\n", "ttl"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := Default(t.TempDir())
			err := Parse("agora.yaml", []byte(c.yaml), cfg)
			if c.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				if !cfg.Leader.Set() {
					t.Error("leader not set")
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("got %v, want an error naming %q", err, c.err)
			}
		})
	}
}

func TestLeader_Defaults(t *testing.T) {
	l := Leader{Lease: "l", Namespace: "a"}
	if l.DurationOrDefault() != 10*time.Second {
		t.Errorf("default duration %s", l.DurationOrDefault())
	}
	if id, err := l.IdentityOrDefault(); err != nil || id == "" {
		t.Errorf("default identity %q, %v", id, err)
	}
	if (Leader{}).Set() {
		t.Error("an empty leader: is set")
	}
}
