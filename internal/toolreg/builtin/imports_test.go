package builtin

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImports_StayInsideTheSandbox keeps the host side and the network out of the packages
// that run in the worker: audit leaves through toolreg.Auditor, requests through Env.Fetch.
func TestImports_StayInsideTheSandbox(t *testing.T) {
	const module = "github.com/agora-dev/agora/"
	forbidden := []struct{ pkg, why string }{
		{module + "internal/store", "the worker opens no database"},
		{module + "internal/audit", "audit records leave through toolreg.Auditor, wired to the gateway"},
		{module + "internal/dispatch", "dispatch is host-side"},
		{module + "internal/secret", "secret values never reach the tool layer"},
		{module + "internal/egress", "the gateway dials; the tools never do"},
		{"modernc.org/sqlite", "the worker opens no database"},
		{"net", "http_fetch goes through Env.Fetch; the tools never dial"},
		{"net/http", "http_fetch goes through Env.Fetch; the tools never dial"},
	}
	for _, pkg := range []string{module + "internal/toolreg", module + "internal/toolreg/builtin"} {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		deps := map[string]bool{}
		for _, d := range strings.Fields(string(out)) {
			deps[d] = true
		}
		if !deps[pkg] {
			t.Fatalf("go list -deps %s did not list the package itself", pkg)
		}
		for _, f := range forbidden {
			if deps[f.pkg] {
				t.Errorf("%s imports %s (directly or indirectly): %s", pkg, f.pkg, f.why)
			}
		}
	}
}
