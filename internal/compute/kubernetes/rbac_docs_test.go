package kubernetes

import (
	"os"
	"strings"
	"testing"
)

// TestDocs_RoleIsTheExampleFile: the Role docs/providers-k8s.md shows is, byte for byte, the
// file it tells people to apply (examples/kubernetes/rbac.yaml), which the real-node test
// TestDispatch_RealPodDocumentedRole (internal/dispatch) applies and runs every provider
// action under. An edit to one without the other fails here.
func TestDocs_RoleIsTheExampleFile(t *testing.T) {
	file, err := os.ReadFile("../../../examples/kubernetes/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../../docs/providers-k8s.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "examples/kubernetes/rbac.yaml") {
		t.Error("docs/providers-k8s.md does not name examples/kubernetes/rbac.yaml")
	}
	var shown []string
	for _, block := range strings.Split(string(doc), "```yaml\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		// The provider's Role (agora in agents); the leader Lease's Role of the two-replica
		// StatefulSet (agora-leader) is another manifest.
		if strings.Contains(block, "kind: Role\nmetadata: {name: agora, namespace: agents}\n") {
			shown = append(shown, block)
		}
	}
	if len(shown) != 1 {
		t.Fatalf("docs/providers-k8s.md shows %d YAML blocks with a Role, want 1", len(shown))
	}
	if shown[0] != string(file) {
		t.Errorf("the Role in docs/providers-k8s.md differs from examples/kubernetes/rbac.yaml:\ndocs:\n%s\nfile:\n%s", shown[0], file)
	}
}
