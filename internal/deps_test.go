package internal_test

import (
	"slices"
	"strings"
	"testing"
)

// edge is an import-graph edge that must never exist, with its reason. It counts through any
// intermediate package (the non-test graph of `go list -deps`). from is a package of the
// module; to is one too ("internal/store"), every module package beneath a directory
// ("internal/runtime/..."), or a third-party package or module ("modernc.org/sqlite"). Both
// must exist: a row naming a moved or renamed package fails until it is fixed.
type edge struct {
	from, to string
	why      string
}

// forbidden lists the edges of the privilege boundary, except the sandbox side's, which
// sandboxEdges generates.
var forbidden = []edge{
	{"internal/catalog", "internal/catalog/provision", "the catalog's read side must not reach its privileged writer"},
	{"internal/orch/client", "internal/store", "orch.db has one owner, agora orch serve; its clients talk to the socket"},
	{"internal/orch/client", "internal/orch", "clients import the wire types, never the engine"},
	{"internal/orch/api", "internal/store", "the wire types are plain data"},
	{"internal/orch/plan", "internal/store", "the plan format is pure: validate works offline"},
	{"internal/mcpserver", "internal/orch", "the MCP server reaches the orchestrator through its port; cancel, answer and retry are not on it"},
	{"internal/mcpserver", "internal/orch/client", "the MCP server is handed an Orchestrator port; the CLI adapts the client"},
	{"internal/catalog", "internal/secret", "the read side never holds the sealing key"},
	{"internal/dispatch", "internal/catalog/provision", "run time composes the catalog; it never changes it"},
	{"internal/dispatch", "internal/deploy", "run time composes the catalog; it never changes it"},
	{"internal/compute", "internal/catalog", "providers run specs; they know nothing of catalogs"},
	{"internal/compute/local", "internal/store", "providers hold no state of their own in agora.db"},
	{"internal/compute/container", "internal/store", "providers hold no state of their own in agora.db"},
	{"internal/compute/container", "internal/compute/local", "providers never import each other"},
	{"internal/compute/local", "internal/compute/container", "providers never import each other"},
	{"internal/compute/fdpass", "internal/secret", "fdpass runs in the container and moves bytes it never parses; it never holds the sealer"},
	{"internal/compute/fdpass", "github.com/moby/moby/client", "fdpass runs in the container; the engine's client is the host's"},
	{"internal/egress", "internal/store", "the dialer is a leaf"},
	{"internal/secret/redact", "internal/secret", "redaction is the harmless half; it never holds keys"},
	{"internal/mcpserver", "internal/catalog/provision", "an AI composes the catalog over MCP; it never changes it (ADR-0005)"},
	{"internal/mcpserver", "internal/deploy", "an AI composes the catalog over MCP; it never changes it (ADR-0005)"},
	{"internal/mcpserver", "internal/catalog/ccimport", "importing Claude Code subagents is deploy time, a person's; never an MCP tool"},
	{"internal/dispatch", "internal/catalog/ccimport", "run time composes the catalog; it never changes it"},
	{"internal/mcpserver", "internal/secret", "the MCP server never seals or opens a secret"},
	{"internal/mcpserver", "internal/store", "the MCP server is handed ports; it opens no database"},
	{"internal/mcpserver", "modernc.org/sqlite", "the MCP server is handed ports; it opens no database"},
	{"internal/mcpserver", "internal/home", "the MCP server never opens AGORA_HOME"},
	{"internal/mcpserver", "internal/config", "the MCP server is handed values; only config reads agora.yaml and AGORA_*"},
	{"internal/mcpserver", "internal/dispatch", "the dispatcher holds the unsealer; the MCP server reaches it through its Dispatcher port only"},
	{"internal/mcpserver", "internal/catalog/view", "the MCP server is handed a catalog lister, not the package that opens the store"},
	{"internal/modelgw", "internal/store", "the gateway records through the Auditor it is handed; it opens no database"},
	{"internal/modelgw", "modernc.org/sqlite", "the gateway records through the Auditor it is handed; it opens no database"},
	{"internal/modelgw", "internal/dispatch", "the gateway is handed its config; it knows nothing of dispatch records"},
	{"internal/dispatch", "internal/worker", "the host shares only the wire contract with the worker (internal/worker/wire), never the code that runs in the sandbox"},
	{"internal/dispatch", "internal/runtime/execrt", "the runtimes run in the worker; the host links only the wire contract"},
	{"internal/dispatch", "internal/runtime/claudert", "the runtimes run in the worker; the host links only the wire contract"},
	{"internal/dispatch", "internal/runtime/openairt", "the runtimes run in the worker; the host links only the wire contract"},
	{"internal/dispatch", "internal/toolreg/builtin", "the built-in tools run in the worker; the host links only the wire contract"},
	{"internal/worker/wire", "internal/worker", "the wire contract is plain data both sides link; the worker imports it, never the reverse"},
	{"internal/worker/wire", "internal/dispatch", "the wire contract is plain data both sides link; the dispatcher imports it, never the reverse"},
	{"internal/worker/wire", "internal/store", "the wire contract is plain data; the worker links it and opens no database"},
	{"internal/worker/wire", "internal/secret", "the wire contract is plain data; the worker links it and never holds the sealer"},
	{"internal/worker/wire", "internal/runtime/execrt", "the wire contract is plain data; the host links it without the runtimes"},
	{"internal/worker/wire", "internal/runtime/claudert", "the wire contract is plain data; the host links it without the runtimes"},
	{"internal/worker/wire", "internal/runtime/openairt", "the wire contract is plain data; the host links it without the runtimes"},
	{"internal/home", "internal/dispatch", "home lays out AGORA_HOME; the composition root hands it agora.db's migrations (internal/agoradb)"},
	{"internal/catalog", "internal/blob", "catalog types carry digests (package digest); storing content is the host's blob store"},
	{"internal/mcpserver", "internal/blob", "the MCP server reads catalog metadata; it never writes content"},
	{"internal/catalog", "internal/toolreg", "the grant and the built-in tool names are package grant's; the registry is the worker's"},
	{"internal/toolreg", "internal/catalog", "the registry takes a grant.Set; the catalog's formats are the host's"},
	{"internal/mcpserver", "internal/workspace", "the MCP server names workspaces; it never runs git or sees a repository path (the dispatcher resolves them)"},
	{"internal/workspace", "internal/store", "workspace resolves revisions with git; it reads the catalog through a Reader it is handed"},
	{"internal/workspace", "internal/secret", "workspace resolves revisions; it never holds the sealer"},
	{"internal/gitbranch", "internal/store", "gitbranch is handed patches; it opens no database"},
	{"internal/gitbranch", "internal/secret", "gitbranch writes git history; it never holds the sealer"},
	{"internal/mcpserver", "internal/gitbranch", "an AI reads patches over MCP; branches are made by people on the CLI"},
	{"cmd/agora-full", "internal/worker", "the host binds cmd/agora-worker into sandboxes and never runs the worker itself (#28)"},
	{"cmd/agora-full", "internal/k8stest", "the Kubernetes test harness starts control planes from test binaries; it never ships"},
	{"internal/compute/kubernetes", "internal/compute/local", "providers never import each other"},
	{"internal/dispatch", "internal/compute/local", "the dispatch starts and warms through compute.Provider and compute.Warmer; a provider's slots are its own (ADR 0022)"},
	{"internal/dispatch", "internal/compute/container/...", "the dispatch starts and warms through compute.Provider and compute.Warmer; a docker slot, its gateway and claim marks are the docker warmer's (ADR 0022)"},
	{"internal/dispatch", "internal/compute/kubernetes", "the dispatch starts and warms through compute.Provider and compute.PoolWarmer; a pool's template, policy and claims are the provider's (ADR 0022)"},
	{"internal/dispatch", "internal/netgw", "the slot gateway is the warmers'; the dispatch exports sessions through the provider and binds pool pods through its options (ADR 0022)"},
	{"internal/selftest", "internal/catalog/provision", "selftest changes no catalog itself; it drives agora apply in its throw-away home"},
	{"internal/selftest", "internal/home", "selftest never opens a home; the person's is the command's, the throw-away one agora's"},
	{"internal/selftest", "internal/dispatch", "each attack is a real dispatch through the agora program, never a call that could skip a step"},
	{"internal/compute/kubernetes", "internal/store", "providers hold no state of their own in agora.db; the cluster's labels are the record"},
	{"internal/compute/kubernetes", "internal/secret", "the provider is handed a session token, never the sealer"},
	{"internal/worker", "k8s.io/client-go", "the worker in a pod talks to agora's gateway, never to the cluster's API"},
	{"internal/mcpserver", "k8s.io/client-go", "the MCP server is handed ports; cluster access is the provider's"},
	// No work at start-up.
	{"cmd/agora-full", "k8s.io/client-go/kubernetes/scheme", "its init registers every Kubernetes API group (650 KB, milliseconds) in every agora process; the kubernetes provider builds a scheme of the three groups it uses when a kubernetes target is first used"},
	{"cmd/agora-full", "k8s.io/client-go/kubernetes", "the clientset links client-go's all-groups scheme; the kubernetes provider uses its own client of the three groups it needs"},
	{"cmd/agora-full", "k8s.io/client-go/testing", "client-go's fakes (linked by gentype) pull in server-side apply (structured-merge-diff, the OpenAPI models) and their inits; the provider's typed client is its own"},
}

// inSandbox are the packages that run inside the sandbox, in the worker process. Every
// internal/runtime/<name> package joins them without a row, so a new runtime is covered the
// day it lands; the packages beneath a runtime (test doubles such as openaitest) run only in
// tests, and whatever a runtime does import from beneath it is in its closure anyway.
// cmd/agora-worker is the program the host binds into every sandbox: the worker,
// the hook, fetch and fdpass, and nothing else.
var inSandbox = []string{"cmd/agora-worker", "internal/worker", "internal/toolreg", "internal/toolreg/builtin"}

// hostOnly are what a package in the sandbox must never link, each with its reason.
var hostOnly = []struct{ to, why string }{
	{"internal/store", "it sees only what is mounted into the sandbox"},
	{"modernc.org/sqlite", "it opens no database"},
	{"internal/home", "it never opens AGORA_HOME"},
	{"internal/secret", "secret values reach the sandbox on a file descriptor, not through the sealer (redact is the harmless half)"},
	{"internal/catalog/provision", "it never changes the catalog"},
	{"internal/deploy", "it never changes the catalog"},
	{"internal/modelgw", "it reaches the gateway over a socket, never its code; the gateway holds the API key"},
	{"internal/egress", "the sandbox has no network: requests leave through the gateway"},
	{"internal/audit", "audit records leave the sandbox through the gateway"},
	{"internal/dispatch", "the dispatcher is the host side"},
	{"internal/runtimebin", "the host resolves and hashes the agent CLIs; the sandbox only runs the bound copy"},
	{"internal/workerbin", "the host locates and hashes the worker binary; the sandbox only runs the bound copy"},
	// The slim worker: what only the host needs, and what made every sandbox and every
	// Claude Code hook event start a 90 MB binary with 389 package inits.
	{"k8s.io/client-go", "the worker in a pod talks to agora's gateway, never to the cluster's API"},
	{"go.opentelemetry.io/otel/sdk", "spans are the host's; the worker exports none"},
	{"github.com/prometheus/client_golang", "metrics are the host's (agora orch serve --metrics)"},
	{"github.com/moby/moby/client", "the container engine's client is the host's"},
	{"github.com/spf13/cobra", "the sandbox's command line is a contract the host writes, parsed by hand in cmd/agora-worker"},
	// Object storage is the host's; the worker never holds bucket credentials.
	{"internal/s3", "blobs and anchors reach object storage from the host, with the host's credentials"},
	{"github.com/aws/aws-sdk-go-v2", "the S3 signer is the host's (internal/s3)"},
}

// sandboxEdges is inSandbox, with every runtime, times hostOnly.
func sandboxEdges(t *testing.T, g *graph) []edge {
	var runtimes []string
	for _, p := range g.under("internal/runtime") {
		if !strings.Contains(strings.TrimPrefix(p, "internal/runtime/"), "/") {
			runtimes = append(runtimes, p)
		}
	}
	if len(runtimes) == 0 {
		t.Fatal("no package matches internal/runtime/<name>: the runtimes moved; fix inSandbox's discovery")
	}
	var out []edge
	for _, from := range slices.Concat(inSandbox, runtimes) {
		for _, h := range hostOnly {
			out = append(out, edge{from, h.to, from + " runs in the sandbox; " + h.why})
		}
	}
	return out
}

// TestImportBoundaries keeps the privilege boundary visible in the import graph.
func TestImportBoundaries(t *testing.T) {
	g := loadGraph(t)
	for _, e := range slices.Concat(forbidden, sandboxEdges(t, g)) {
		if !g.own(module + e.from) {
			t.Errorf("package %s not found: the boundary list is stale; fix the row (%s ↛ %s)", e.from, e.from, e.to)
			continue
		}
		if !g.exists(t, e.to) {
			t.Errorf("%s not found in the module or its requirements: the boundary list is stale; fix the row (%s ↛ %s)", e.to, e.from, e.to)
			continue
		}
		if c := g.chain(t, module+e.from, e.to); c != nil {
			t.Errorf("%s imports %s (%s): %s", e.from, e.to, strings.ReplaceAll(strings.Join(c, " → "), module, ""), e.why)
		}
	}
}
