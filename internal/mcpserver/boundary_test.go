package mcpserver_test

import (
	"path"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// theEleven is the whole MCP surface. Changing it is a design decision (ADR-0005), not a
// refactor: the two schedule readers are the lead's design (docs/mcp.md); schedules are
// added and removed on the host only.
var theEleven = []string{
	"agora_capabilities_list",
	"agora_dispatch",
	"agora_dispatch_cancel",
	"agora_dispatch_describe",
	"agora_envs_list",
	"agora_orchestrator_schedule_show",
	"agora_orchestrator_schedules_list",
	"agora_orchestrator_status",
	"agora_orchestrator_submit",
	"agora_orchestrator_watch",
	"agora_subagents_list",
}

// privileged are name shapes that must never be a tool, whatever else changes.
var privileged = []string{"*_register", "*_assign", "*_apply", "*import*", "*_audit", "*_serve", "*_retire", "*_secret*", "agora_orchestrator_cancel", "*orch*_cancel",
	"*schedule*_add", "*schedule*_remove", "*schedule*_create", "*schedule*_delete", "*schedule*_update"}

// deployTime are name shapes of deploy-time CLI commands that read the home and must never be
// a tool: `agora capability suggest` proposes grants from what dispatches did.
var deployTime = []string{"*suggest*", "*grant*", "*capabilit*_write*"}

// TestPrivilegeBoundary lists the tools of the real binary through the official SDK client,
// over stdio and over HTTP, and pins the exact set. It needs nothing optional and never skips.
func TestPrivilegeBoundary(t *testing.T) {
	home := newHome(t)
	token := newToken(t)
	srv := httpServer(t, home, []string{"AGORA_HTTP_TOKEN=" + token})
	transports := map[string][]string{
		"stdio": toolNames(t, stdioSession(t, home)),
		"http":  toolNames(t, httpSession(t, srv.url, token)),
	}
	for name, got := range transports {
		t.Run(name, func(t *testing.T) {
			slices.Sort(got)
			if diff := cmp.Diff(theEleven, got); diff != "" {
				t.Errorf("tools over %s differ from the eleven run-time tools (-want +got):\n%s", name, diff)
			}
			for _, tool := range got {
				for _, pat := range slices.Concat(privileged, deployTime) {
					if ok, _ := path.Match(pat, tool); ok {
						t.Errorf("tool %q matches the privileged shape %q", tool, pat)
					}
				}
			}
		})
	}
}
