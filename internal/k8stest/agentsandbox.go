package k8stest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// AgentSandboxCRDs are the CustomResourceDefinitions of kubernetes-sigs/agent-sandbox that
// Options.AgentSandbox installs, by name.
var AgentSandboxCRDs = []string{
	"sandboxes.agents.x-k8s.io",
	"sandboxclaims.extensions.agents.x-k8s.io",
	"sandboxtemplates.extensions.agents.x-k8s.io",
	"sandboxwarmpools.extensions.agents.x-k8s.io",
}

// installAgentSandboxCRDs creates the CRDs from the pinned module's k8s/crds/*.yaml (copied by
// scripts/k8s-tools.sh), as they are: the apiserver takes YAML. Their conversion between
// v1alpha1 and v1beta1 is a webhook the controller serves behind a Service; a test cluster has
// no Service network, so the strategy becomes None. Everything here speaks v1beta1, the
// storage version, so nothing is ever converted.
func (c *Cluster) installAgentSandboxCRDs(ctx context.Context, files []string) error {
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("agent-sandbox CRD: %w", err)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost,
			c.Server+"/apis/apiextensions.k8s.io/v1/customresourcedefinitions", bytes.NewReader(b))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/yaml")
		req.Header.Set("Accept", "application/json")
		resp, err := c.client.Do(req)
		if err != nil {
			return fmt.Errorf("install %s: %w", filepath.Base(f), err)
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("install %s: %s: %s", filepath.Base(f), resp.Status, body)
		}
	}
	noConversion := map[string]any{"spec": map[string]any{"conversion": map[string]any{"strategy": "None", "webhook": nil}}}
	for _, name := range AgentSandboxCRDs {
		path := "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/" + name
		if err := c.Do(ctx, http.MethodPatch, path, noConversion, nil); err != nil {
			return fmt.Errorf("agent-sandbox CRD %s: %w", name, err)
		}
		if err := c.Wait(ctx, path, crdEstablished); err != nil {
			return fmt.Errorf("agent-sandbox CRD %s: %w", name, err)
		}
	}
	return nil
}

// crdEstablished reports whether a CRD's Established condition is True.
func crdEstablished(obj map[string]any) (bool, error) {
	st, _ := obj["status"].(map[string]any)
	conds, _ := st["conditions"].([]any)
	for _, x := range conds {
		cond, _ := x.(map[string]any)
		if cond["type"] == "Established" && cond["status"] == "True" {
			return true, nil
		}
	}
	return false, nil
}

// agentSandboxProc runs the real agent-sandbox controller with its extensions (templates,
// claims, warm pools) as the admin, without its webhook (no Service network to reach it) and
// without leader election, metrics or probes listening.
func (c *Cluster) agentSandboxProc(dir string, bins *binaries) *proc {
	return newProc(dir, "agent-sandbox-controller", []string{bins.agentSandbox,
		"--extensions",
		"--enable-webhook=false",
		"--leader-elect=false",
		"--metrics-bind-address=0",
		"--health-probe-bind-address=0",
		"--kube-api-qps=200", "--kube-api-burst=400",
	}, "KUBECONFIG="+c.Kubeconfig, "HOME="+dir, noWatchList)
}

// agentSandboxFiles finds the controller and the CRD files in the bin directory.
func agentSandboxFiles(dir string) (controller string, crds []string, missing []string) {
	controller = filepath.Join(dir, "agent-sandbox-controller")
	if fi, err := os.Stat(controller); err != nil || fi.Mode()&0o111 == 0 {
		missing = append(missing, "agent-sandbox-controller")
	}
	crds, _ = filepath.Glob(filepath.Join(dir, "agent-sandbox-crds", "*.yaml"))
	sort.Strings(crds)
	if len(crds) != len(AgentSandboxCRDs) {
		missing = append(missing, fmt.Sprintf("agent-sandbox-crds/*.yaml (%d files, want %d)", len(crds), len(AgentSandboxCRDs)))
	}
	return controller, crds, missing
}

// AgentSandboxLog is the end of the controller's log, for a failure message.
func (c *Cluster) AgentSandboxLog() string {
	if !c.opts.AgentSandbox {
		return "(no agent-sandbox controller: Options.AgentSandbox is false)"
	}
	return strings.TrimSpace(c.Log("agent-sandbox-controller"))
}
