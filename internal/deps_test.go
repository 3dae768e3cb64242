package internal_test

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/agora-dev/agora/"

// forbidden lists import-graph edges that must never exist, each with its reason. The check
// uses `go list -deps`, so an edge through any intermediate package counts.
var forbidden = []struct {
	from, to string
	why      string
}{
	{"internal/catalog", "internal/catalog/provision", "the catalog's read side must not reach its privileged writer"},
	{"internal/orch/client", "internal/store", "orch.db has one owner, agora orch serve; its clients talk to the socket"},
	{"internal/orch/client", "internal/orch", "clients import the wire types, never the engine"},
	{"internal/orch/api", "internal/store", "the wire types are plain data"},
	{"internal/orch/plan", "internal/store", "the plan format is pure: validate works offline"},
	{"internal/mcpserver", "internal/orch", "the MCP server reaches the orchestrator through its port; cancel, answer and retry are not on it"},
	{"internal/mcpserver", "internal/orch/client", "the MCP server is handed an Orchestrator port; the CLI adapts the client"},
	{"internal/catalog", "internal/secret", "the read side never holds the sealing key"},
	{"internal/worker", "internal/store", "a worker sees only what is mounted into its sandbox"},
	{"internal/worker", "modernc.org/sqlite", "a worker opens no database"},
	{"internal/worker", "internal/secret", "secret values reach a worker on a file descriptor, not through the sealer"},
	{"internal/worker", "internal/catalog/provision", "a worker never changes the catalog"},
	{"internal/worker", "internal/deploy", "a worker never changes the catalog"},
	{"internal/worker", "internal/home", "a worker never opens AGORA_HOME"},
	{"internal/dispatch", "internal/catalog/provision", "run time composes the catalog; it never changes it"},
	{"internal/dispatch", "internal/deploy", "run time composes the catalog; it never changes it"},
	{"internal/compute", "internal/catalog", "providers run specs; they know nothing of catalogs"},
	{"internal/compute/local", "internal/store", "providers hold no state of their own in agora.db"},
	{"internal/egress", "internal/store", "the dialer is a leaf"},
	{"internal/secret/redact", "internal/secret", "redaction is the harmless half; it never holds keys"},
	{"internal/mcpserver", "internal/catalog/provision", "an AI composes the catalog over MCP; it never changes it (ADR-0005)"},
	{"internal/mcpserver", "internal/deploy", "an AI composes the catalog over MCP; it never changes it (ADR-0005)"},
	{"internal/mcpserver", "internal/secret", "the MCP server never seals or opens a secret"},
	{"internal/mcpserver", "internal/store", "the MCP server is handed ports; it opens no database"},
	{"internal/mcpserver", "modernc.org/sqlite", "the MCP server is handed ports; it opens no database"},
	{"internal/mcpserver", "internal/home", "the MCP server never opens AGORA_HOME"},
	{"internal/mcpserver", "internal/config", "the MCP server is handed values; only config reads agora.yaml and AGORA_*"},
	{"internal/mcpserver", "internal/dispatch", "the dispatcher holds the unsealer; the MCP server reaches it through its Dispatcher port only"},
	{"internal/mcpserver", "internal/catalog/view", "the MCP server is handed a catalog lister, not the package that opens the store"},
	{"internal/toolreg", "internal/store", "the tool registry runs in the worker; it sees only what is mounted into the sandbox"},
	{"internal/toolreg", "internal/audit", "the tool registry runs in the worker; audit records leave through the gateway"},
	{"internal/toolreg", "internal/dispatch", "the tool registry runs in the worker; the dispatcher is the host side"},
	{"internal/toolreg", "internal/gateway", "the tool registry runs in the worker; it reaches the gateway over a socket, never its code"},
	{"internal/toolreg", "internal/secret", "the tool registry runs in the worker; secret values reach the sandbox on a descriptor (redact is the harmless half)"},
	{"internal/toolreg", "internal/egress", "the tool registry runs in the worker; the sandbox has no network: requests leave through the gateway"},
	{"internal/toolreg/builtin", "internal/store", "the built-in tools run in the worker; it sees only what is mounted into the sandbox"},
	{"internal/toolreg/builtin", "internal/audit", "the built-in tools run in the worker; audit records leave through the gateway"},
	{"internal/toolreg/builtin", "internal/dispatch", "the built-in tools run in the worker; the dispatcher is the host side"},
	{"internal/toolreg/builtin", "internal/gateway", "the built-in tools run in the worker; it reaches the gateway over a socket, never its code"},
	{"internal/toolreg/builtin", "internal/secret", "the built-in tools run in the worker; secret values reach the sandbox on a descriptor (redact is the harmless half)"},
	{"internal/toolreg/builtin", "internal/egress", "the built-in tools run in the worker; the sandbox has no network: requests leave through the gateway"},
	{"internal/runtime/openairt", "internal/store", "the openai runtime runs in the worker; it sees only what is mounted into the sandbox"},
	{"internal/runtime/openairt", "internal/audit", "the openai runtime runs in the worker; audit records leave through the gateway"},
	{"internal/runtime/openairt", "internal/dispatch", "the openai runtime runs in the worker; the dispatcher is the host side"},
	{"internal/runtime/openairt", "internal/gateway", "the openai runtime runs in the worker; it reaches the gateway over a socket, never its code"},
	{"internal/runtime/openairt", "internal/secret", "the openai runtime runs in the worker; secret values reach the sandbox on a descriptor (redact is the harmless half)"},
	{"internal/runtime/openairt", "internal/egress", "the openai runtime runs in the worker; the sandbox has no network: requests leave through the gateway"},
	{"internal/runtime/claudert", "internal/store", "the claude-code runtime runs in the worker; it sees only what is mounted into the sandbox"},
	{"internal/runtime/claudert", "internal/audit", "the claude-code runtime runs in the worker; audit records leave through the gateway"},
	{"internal/runtime/claudert", "internal/dispatch", "the claude-code runtime runs in the worker; the dispatcher is the host side"},
	{"internal/runtime/claudert", "internal/gateway", "the claude-code runtime runs in the worker; it reaches the gateway over a socket, never its code"},
	{"internal/runtime/claudert", "internal/secret", "the claude-code runtime runs in the worker; secret values reach the sandbox on a descriptor (redact is the harmless half)"},
	{"internal/runtime/claudert", "internal/egress", "the claude-code runtime runs in the worker; the sandbox has no network: requests leave through the gateway"},
	{"internal/runtime/execrt", "internal/store", "the exec runtime runs in the worker; it sees only what is mounted into the sandbox"},
	{"internal/runtime/execrt", "internal/audit", "the exec runtime runs in the worker; audit records leave through the gateway"},
	{"internal/runtime/execrt", "internal/dispatch", "the exec runtime runs in the worker; the dispatcher is the host side"},
	{"internal/runtime/execrt", "internal/gateway", "the exec runtime runs in the worker; it reaches the gateway over a socket, never its code"},
	{"internal/runtime/execrt", "internal/secret", "the exec runtime runs in the worker; secret values reach the sandbox on a descriptor (redact is the harmless half)"},
	{"internal/runtime/execrt", "internal/egress", "the exec runtime runs in the worker; the sandbox has no network: requests leave through the gateway"},
	{"internal/worker", "internal/gateway", "the worker reaches the gateway over its socket; the gateway holds the API key"},
	{"internal/worker", "internal/egress", "the sandbox has no network: requests leave through the gateway"},
	{"internal/worker", "internal/audit", "audit records leave the sandbox through the gateway"},
	{"internal/worker", "internal/dispatch", "the dispatcher is the host side"},
	{"internal/gateway", "internal/store", "the gateway records through the Auditor it is handed; it opens no database"},
	{"internal/gateway", "modernc.org/sqlite", "the gateway records through the Auditor it is handed; it opens no database"},
	{"internal/gateway", "internal/dispatch", "the gateway is handed its config; it knows nothing of dispatch records"},
}

func deps(t *testing.T, pkg string) map[string]bool {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-json=ImportPath", module+pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	set := map[string]bool{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p struct{ ImportPath string }
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		set[p.ImportPath] = true
	}
	return set
}

// TestImportBoundaries keeps the privilege boundary visible in the import graph.
func TestImportBoundaries(t *testing.T) {
	cache := map[string]map[string]bool{}
	for _, f := range forbidden {
		if cache[f.from] == nil {
			cache[f.from] = deps(t, f.from)
		}
		if !cache[f.from][module+f.from] {
			t.Fatalf("package %s not found: the boundary list is stale", f.from)
		}
		to := f.to
		if strings.HasPrefix(to, "internal/") {
			to = module + to
		}
		if cache[f.from][to] {
			t.Errorf("%s imports %s (directly or indirectly): %s", f.from, f.to, f.why)
		}
	}
}
