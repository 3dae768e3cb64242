package k8stest

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// allowedBeyondStd are the packages outside the standard library the harness may link, each
// with no dependencies of its own: the cluster DNS stand-in speaks DNS with x/net's
// dnsmessage (services.go) rather than a parser of its own. The harness's own subpackages
// (nodeparse: the node's parsers, apart for their fuzz binary) are held to the same rule:
// whatever they link is in the list go list gives and is checked here too.
var allowedBeyondStd = []string{"golang.org/x/net/dns/dnsmessage"}

// TestStandardLibraryOnly holds the harness to the standard library (and allowedBeyondStd): a
// Kubernetes client here would put Kubernetes in agora's go.mod for every build, where the
// tools module under .cache keeps it out.
func TestStandardLibraryOnly(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		own := p == "github.com/agora-dev/agora/internal/k8stest" || strings.HasPrefix(p, "github.com/agora-dev/agora/internal/k8stest/")
		if !own && !slices.Contains(allowedBeyondStd, p) {
			t.Errorf("k8stest links %s; it may link the standard library only", p)
		}
	}
}
