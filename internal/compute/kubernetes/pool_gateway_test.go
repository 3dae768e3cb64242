package kubernetes

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/remote"
	"github.com/agora-dev/agora/internal/k8stest"
	"github.com/agora-dev/agora/internal/netgw"
	workerremote "github.com/agora-dev/agora/internal/worker/remote"
)

// The pool tests run on the shared control plane with kwok, against a real network gateway
// with its slot store: a test plays each pool pod's worker (kwok runs no process).

// slotGW is a real network gateway serving sessions and slots on loopback.
type slotGW struct {
	srv   *netgw.Server
	reg   *netgw.Registry
	slots *netgw.Slots
	url   string
	ca    []byte
	// pods is a pool gateway's verifier (startPoolGW): a test may set another.
	pods *lateVerifier
}

// warmSpec is a dispatch's spec whose binds the real gateway exports, all below /agora.
func warmSpec(t testing.TB, id string) compute.Spec {
	bundle, out := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(bundle, "task.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	return compute.Spec{
		ID:   id,
		Argv: []string{"/agora/bin/agora-worker", "worker"},
		Env:  []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "AGORA_DISPATCH_ID=" + id},
		Dir:  "/agora/workspace",
		Binds: []compute.Bind{
			{Src: "/usr/local/bin/agora", Dst: "/agora/bin/agora-worker"},
			{Src: bundle, Dst: "/agora/bundle"},
			{Src: out, Dst: "/agora/out", Writable: true, Result: true},
		},
		Limits: compute.Limits{Timeout: 90 * time.Second, Memory: 1 << 30, Scratch: 256 << 20},
	}
}

// warmPlaces are warmSpec's read-only places (its bundle), as the dispatch package derives
// them from a template (SlotOptions.Places).
var warmPlaces = []remote.SlotPlace{{Dst: "/agora/bundle"}}

// testHome is the tests' holder identity (SlotOptions.Home).
const testHome = "k8swarmtesthome"

// warmSandboxProviders are two providers of one `backend: agent-sandbox` target on the shared
// cluster with agent-sandbox's real controller, exporting to g's registry: as agora's
// ServiceAccount under the documented Role (examples/kubernetes/rbac.yaml), and as the admin
// (for what the test itself reads: the slot's Secret, as its pod's secretKeyRef does).
func warmSandboxProviders(t testing.TB, g *slotGW) (role, admin *Provider) {
	t.Helper()
	c := k8stest.Shared(t, k8stest.Options{AgentSandbox: true})
	docs, err := os.ReadFile("../../../examples/kubernetes/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyYAML(t.Context(), []byte(strings.ReplaceAll(string(docs), "namespace: agents", "namespace: "+c.Namespace))); err != nil && !alreadyApplied(err) {
		// Another test of the shared cluster applied it (TestAgentSandboxBackend_*).
		t.Fatalf("apply the documented Role: %v", err)
	}
	kubeconfig, err := c.ServiceAccountKubeconfig(t.Context(), "agora")
	if err != nil {
		t.Fatal(err)
	}
	o := testOptions(t, g.reg)
	o.Namespace, o.Backend = c.Namespace, BackendAgentSandbox
	o.Kubeconfig = c.Kubeconfig
	if admin, err = New(o); err != nil {
		t.Fatal(err)
	}
	o.Kubeconfig = kubeconfig
	if role, err = New(o); err != nil {
		t.Fatal(err)
	}
	nodeSchedulable(t, admin)
	return role, admin
}

// workerClaims plays the slot pod's worker: it claims with the slot's token and reports the
// dispatch it was handed ("" and the error when refused).
func workerClaims(ctx context.Context, g *slotGW, id, token string) <-chan string {
	got := make(chan string, 1)
	go func() {
		c, err := workerremote.Claim(ctx, g.url, id, token, g.ca, nil)
		if err != nil {
			got <- "refused: " + err.Error()
			return
		}
		got <- c.Dispatch()
		c.Close()
	}()
	return got
}
