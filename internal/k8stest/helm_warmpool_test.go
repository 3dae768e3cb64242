package k8stest_test

import (
	"context"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/agora-dev/agora/internal/config"
)

// TestHelmChart_WarmPoolGrantsOnlyWhenAsked: the grants of agent-sandbox warm pools
// (warm_pool: a Role on the pool's objects, the pool pods' account, create on TokenReviews,
// the one cluster-wide grant) are rendered only with target.warmPool: N > 0, and then exactly
// as examples/kubernetes/rbac-pool.yaml has them (its Roles' rules, agora's account in the
// agora namespace as the subject); the default rendering has none of them, nor any
// ClusterRole. With N the target is `backend: agent-sandbox`, `warm: N`, `warm_pool: true`,
// and agora takes that agora.yaml; N above 16 is refused by the chart's schema.
func TestHelmChart_WarmPoolGrantsOnlyWhenAsked(t *testing.T) {
	helm := helmBin(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	docs := func(out string) map[string]map[string]any {
		m := map[string]map[string]any{}
		for _, doc := range strings.Split(out, "\n---\n") {
			var obj map[string]any
			if err := yaml.Unmarshal([]byte(doc), &obj); err != nil || obj == nil {
				continue
			}
			meta, _ := obj["metadata"].(map[string]any)
			m[obj["kind"].(string)+"/"+meta["name"].(string)] = obj
		}
		return m
	}
	def, err := runHelm(ctx, helm, "template", "agora", chartDir)
	if err != nil {
		t.Fatal(err)
	}
	for key := range docs(def) {
		if strings.Contains(key, "agora-pool") || strings.HasPrefix(key, "ClusterRole") {
			t.Errorf("the default rendering has %s", key)
		}
	}
	for _, word := range []string{"sandboxclaims", "sandboxwarmpools", "tokenreviews", "warm_pool"} {
		if strings.Contains(def, word) {
			t.Errorf("the default rendering names %s", word)
		}
	}

	out, err := runHelm(ctx, helm, "template", "agora", chartDir, "--set", "target.warmPool=2")
	if err != nil {
		t.Fatal(err)
	}
	got := docs(out)
	b, err := os.ReadFile("../../examples/kubernetes/rbac-pool.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := docs(string(b))
	for _, key := range []string{"Role/agora-pool", "ClusterRole/agora-pool-tokenreview"} {
		if got[key] == nil || !reflect.DeepEqual(got[key]["rules"], want[key]["rules"]) {
			t.Errorf("%s: rendered %v, want examples/kubernetes/rbac-pool.yaml's rules %v", key, got[key]["rules"], want[key]["rules"])
		}
	}
	for _, key := range []string{"RoleBinding/agora-pool", "ClusterRoleBinding/agora-pool-tokenreview"} {
		subj := []any{map[string]any{"kind": "ServiceAccount", "name": "agora", "namespace": "agora"}}
		if got[key] == nil || !reflect.DeepEqual(got[key]["subjects"], subj) {
			t.Errorf("%s: subjects %v, want agora's account in namespace agora alone", key, got[key]["subjects"])
		}
	}
	if sa := got["ServiceAccount/agora-pool"]; sa == nil || sa["automountServiceAccountToken"] != false {
		t.Errorf("the pool pods' account: %v, want automountServiceAccountToken false", sa)
	}
	if r := got["Role/agora"]; r == nil || !reflect.DeepEqual(r["rules"], docs(def)["Role/agora"]["rules"]) {
		t.Errorf("target.warmPool changed agora's own Role: %v", r)
	}
	cfg, _ := renderedAgoraYAML(ctx, t, helm, "--set", "target.warmPool=2")
	c := config.Default(t.TempDir())
	if err := config.Parse("agora.yaml", []byte(cfg), c); err != nil {
		t.Fatalf("agora refuses the chart's agora.yaml with target.warmPool: %v\n%s", err, cfg)
	}
	if tg, err := c.Target("k8s"); err != nil || !tg.KeepsPool() || tg.Warm != 2 || tg.Backend != config.BackendAgentSandbox {
		t.Errorf("target k8s: warm_pool %v, warm %d, backend %q (%v); want true, 2, agent-sandbox", tg.KeepsPool(), tg.Warm, tg.Backend, err)
	}
	if _, err := runHelm(ctx, helm, "template", "agora", chartDir, "--set", "target.warmPool=17"); err == nil || !strings.Contains(err.Error(), "warmPool") {
		t.Errorf("target.warmPool=17: %v, want the schema's refusal", err)
	}
}
