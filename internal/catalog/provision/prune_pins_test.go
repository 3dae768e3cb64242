package provision_test

import (
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/catalog/provision"
)

// A pruning apply that keeps a subagent but drops a capability the subagent pins is refused:
// otherwise the subagent's current version goes on granting the retired capability to every
// dispatch and plan that names it, ADR 0025's run-time check included (the subagent is current).
func TestWriter_PruneRefusesRetiringAPinnedCapability(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	f.registerCap(t, "tools", capDir(t, map[string]string{"f": "tools"}))
	f.registerCap(t, "lint", capDir(t, map[string]string{"f": "lint"}))
	spec := provision.SubagentSpec{Runtime: "exec", Command: []string{"run"}, Capabilities: []string{"tools"}}
	f.registerSubagent(t, "sa", spec)

	sa, err := f.w.PrepareSubagent(ctx, "sa", spec, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The manifest declares sa but neither capability: lint may go, tools may not.
	_, err = f.w.Plan(ctx, []*provision.Pending{sa}, true)
	if err == nil || !strings.Contains(err.Error(), `subagent "sa" pins capability "tools"`) ||
		strings.Contains(err.Error(), `"lint"`) {
		t.Fatalf("Plan = %v, want a refusal naming sa's pin of tools only", err)
	}
	if _, err := f.r.Resolve(ctx, catalog.KindCapability, "tools"); err != nil {
		t.Errorf("tools after the refused plan: %v", err)
	}

	// Declared again, the capability stays and the rest prunes.
	tools, err := f.w.PrepareCapability("tools", capDir(t, map[string]string{"f": "tools"}), nil)
	if err != nil {
		t.Fatal(err)
	}
	changes, err := f.w.Plan(ctx, []*provision.Pending{tools, sa}, true)
	if err != nil {
		t.Fatalf("Plan with tools declared: %v", err)
	}
	var retired []string
	for _, c := range changes {
		if c.Action == catalog.ActionRetire {
			retired = append(retired, string(c.Kind)+" "+c.Name)
		}
	}
	if strings.Join(retired, ",") != "capability lint" {
		t.Errorf("retired = %v, want [capability lint]", retired)
	}

	// Without --prune nothing is retired, so nothing is refused.
	if _, err := f.w.Plan(ctx, []*provision.Pending{sa}, false); err != nil {
		t.Errorf("Plan without prune: %v", err)
	}
}
