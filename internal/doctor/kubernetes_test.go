package doctor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/config"
)

// TestRun_AgentSandbox: a backend: agent-sandbox target whose cluster lacks the CRD is a
// required check, missing, naming the CRD and saying how to fix it; one whose cluster serves
// it is ok and says how many Sandboxes of agora's are there; a Job target is not asked.
func TestRun_AgentSandbox(t *testing.T) {
	c := config.Default("/h")
	c.Targets["as"] = config.Target{Provider: config.ProviderKubernetes, Remote: config.Remote{Backend: config.BackendAgentSandbox, Namespace: "agents"}}
	c.Targets["ok"] = config.Target{Provider: config.ProviderKubernetes, Remote: config.Remote{Backend: config.BackendAgentSandbox, Namespace: "team"}}
	c.Targets["jobs"] = config.Target{Provider: config.ProviderKubernetes, Remote: config.Remote{Namespace: "agents"}}
	h := healthyRoot(nil)
	var asked []string
	h.AgentSandbox = func(_ context.Context, t config.Target) (int, error) {
		asked = append(asked, t.Namespace)
		if t.Namespace == "agents" {
			return 0, fmt.Errorf("%w: agent-sandbox is not installed: the cluster has no CRD sandboxes.agents.x-k8s.io", ErrNoAgentSandbox)
		}
		return 3, nil
	}
	rep := Run(t.Context(), h, Options{Config: c})
	if len(asked) != 2 {
		t.Errorf("asked %v, want the two agent-sandbox targets only", asked)
	}
	checks := map[string]Check{}
	for _, ch := range rep.Checks {
		checks[ch.Name] = ch
	}
	bad := checks["agent-sandbox-as"]
	if bad.Status != StatusMissing || !bad.Required || !strings.Contains(bad.Detail, "sandboxes.agents.x-k8s.io") || !strings.Contains(bad.Fix, "install kubernetes-sigs/agent-sandbox") {
		t.Errorf("missing CRD check = %+v", bad)
	}
	if good := checks["agent-sandbox-ok"]; good.Status != StatusOK || !strings.Contains(good.Detail, "3 of agora's") {
		t.Errorf("installed check = %+v", good)
	}
	if rep.CanDispatch {
		t.Error("CanDispatch with a target whose cluster lacks the CRD")
	}
	h.AgentSandbox = func(context.Context, config.Target) (int, error) { return 0, errors.New("connection refused") }
	rep = Run(t.Context(), h, Options{Config: c})
	for _, ch := range rep.Checks {
		if strings.HasPrefix(ch.Name, "agent-sandbox-") && (ch.Status != StatusMissing || !strings.Contains(ch.Detail, "connection refused")) {
			t.Errorf("unreachable cluster: %+v", ch)
		}
	}
}
