package k8stest_test

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestDeployManifests_RoleIsTheExample: the Role deploy/kubernetes binds to the in-cluster
// agora is examples/kubernetes/rbac.yaml's, rule for rule (the one every provider test runs
// under), and nothing in the files grants more: no ClusterRole, no other Role.
func TestDeployManifests_RoleIsTheExample(t *testing.T) {
	roles := func(path string) []map[string]any {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var out []map[string]any
		for _, doc := range strings.Split(string(b), "\n---\n") {
			var obj map[string]any
			if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			if k, _ := obj["kind"].(string); strings.HasSuffix(k, "Role") {
				out = append(out, obj)
			}
		}
		return out
	}
	example := roles("../../examples/kubernetes/rbac.yaml")
	for _, f := range []string{"namespaces.yaml", "rbac.yaml", "config.yaml", "deployment.yaml"} {
		for _, r := range roles("../../deploy/kubernetes/" + f) {
			if r["kind"] != "Role" || len(example) != 1 || !reflect.DeepEqual(r["rules"], example[0]["rules"]) {
				t.Errorf("%s: %v %v grants other than examples/kubernetes/rbac.yaml's Role:\n%v", f, r["kind"], r["metadata"], r["rules"])
			}
		}
	}
	if got := roles("../../deploy/kubernetes/rbac.yaml"); len(got) != 1 {
		t.Errorf("deploy/kubernetes/rbac.yaml holds %d roles, want the one", len(got))
	}
}
