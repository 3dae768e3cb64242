package k8stest

import (
	"os/exec"
	"strings"
	"testing"
)

// TestStandardLibraryOnly holds the harness to the standard library: a Kubernetes client here
// would put Kubernetes in agora's go.mod for every build, where the tools module under .cache
// keeps it out.
func TestStandardLibraryOnly(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if p != "github.com/agora-dev/agora/internal/k8stest" {
			t.Errorf("k8stest links %s; it may link the standard library only", p)
		}
	}
}
