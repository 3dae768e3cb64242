package verify_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDeps keeps the standalone verifier's import graph free of database, network and agora
// host code: `agora verify` must work on an auditor's machine with nothing but the bundle.
func TestDeps(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("SKIP: the go tool is not on PATH, so the import graph cannot be listed")
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	forbidden := map[string]string{
		"database/sql":          "the verifier opens no database",
		"modernc.org/":          "the verifier opens no database",
		"net/http":              "the verifier fetches nothing",
		"internal/store":        "the verifier opens no database",
		"internal/home":         "the verifier reads no AGORA_HOME",
		"internal/config":       "the verifier reads no agora.yaml",
		"internal/egress":       "the verifier fetches nothing",
		"internal/audit/anchor": "anchors write; the verifier only reads evidence",
	}
	for _, pkg := range strings.Fields(string(out)) {
		for bad, why := range forbidden {
			if strings.HasPrefix(pkg, bad) || strings.Contains(pkg, "/"+bad) {
				t.Errorf("verify imports %s: %s", pkg, why)
			}
		}
	}
}
