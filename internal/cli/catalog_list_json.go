package cli

import (
	"fmt"

	"github.com/agora-dev/agora/internal/catalog"
)

// The JSON of `agora KIND list -o json` and, with what the content holds, `KIND show -o json`:
// the MCP server's agora_*_list answer,
// {capabilities}, {subagents}, {envs} (and {workspaces}, which MCP publishes in agora_dispatch's
// schema instead), each item the kind's catalog entry, the type MCP answers with, plus what only
// the host sees (catalog.HostOnly). The stored versions, with their nested meta, are not shown.

type capabilityListItem struct {
	catalog.CapabilityEntry
	catalog.HostOnly
}

type subagentListItem struct {
	catalog.SubagentEntry
	catalog.HostOnly
}

type envListItem struct {
	catalog.EnvEntry
	catalog.HostOnly
}

type workspaceListItem struct {
	catalog.WorkspaceEntry
	catalog.HostOnly
}

func newCapabilityListItem(v catalog.Version) capabilityListItem {
	return capabilityListItem{catalog.NewCapabilityEntry(v), catalog.NewHostOnly(v)}
}

func newSubagentListItem(v catalog.Version) subagentListItem {
	return subagentListItem{catalog.NewSubagentEntry(v), catalog.NewHostOnly(v)}
}

func newEnvListItem(v catalog.Version) envListItem {
	return envListItem{catalog.NewEnvEntry(v), catalog.NewHostOnly(v)}
}

func newWorkspaceListItem(v catalog.Version) workspaceListItem {
	return workspaceListItem{catalog.NewWorkspaceEntry(v), catalog.NewHostOnly(v)}
}

// listJSON is vs, versions of kind, as `agora KIND list -o json` prints them.
func listJSON(kind catalog.Kind, vs []catalog.Version) (any, error) {
	switch kind {
	case catalog.KindCapability:
		return map[string]any{"capabilities": listItems(vs, newCapabilityListItem)}, nil
	case catalog.KindSubagent:
		return map[string]any{"subagents": listItems(vs, newSubagentListItem)}, nil
	case catalog.KindEnv:
		return map[string]any{"envs": listItems(vs, newEnvListItem)}, nil
	case catalog.KindWorkspace:
		return map[string]any{"workspaces": listItems(vs, newWorkspaceListItem)}, nil
	}
	return nil, fmt.Errorf("no list form for %s", kind)
}

func listItems[I any](vs []catalog.Version, item func(catalog.Version) I) []I {
	out := make([]I, 0, len(vs))
	for _, v := range vs {
		out = append(out, item(v))
	}
	return out
}
