package catalogcmd

import (
	"fmt"

	"github.com/agora-dev/agora/internal/catalog"
)

// The JSON of `agora KIND list -o json` and, with what the content holds, `KIND show -o json`:
// the MCP server's agora_*_list answer,
// {capabilities}, {subagents}, {envs} (and {workspaces}, which MCP publishes in agora_dispatch's
// schema instead), each item the kind's catalog entry, the type MCP answers with, plus what only
// the host sees (catalog.HostOnly). The stored versions, with their nested meta, are not shown.

// CapabilityListItem is one item of agora capability list -o json.
type CapabilityListItem struct {
	catalog.CapabilityEntry
	catalog.HostOnly
}

// SubagentListItem is one item of agora subagent list -o json.
type SubagentListItem struct {
	catalog.SubagentEntry
	catalog.HostOnly
}

// EnvListItem is one item of agora env list -o json.
type EnvListItem struct {
	catalog.EnvEntry
	catalog.HostOnly
}

// WorkspaceListItem is one item of agora workspace list -o json.
type WorkspaceListItem struct {
	catalog.WorkspaceEntry
	catalog.HostOnly
}

// NewCapabilityListItem is v as a list item.
func NewCapabilityListItem(v catalog.Version) CapabilityListItem {
	return CapabilityListItem{catalog.NewCapabilityEntry(v), catalog.NewHostOnly(v)}
}

// NewSubagentListItem is v as a list item.
func NewSubagentListItem(v catalog.Version) SubagentListItem {
	return SubagentListItem{catalog.NewSubagentEntry(v), catalog.NewHostOnly(v)}
}

// NewEnvListItem is v as a list item.
func NewEnvListItem(v catalog.Version) EnvListItem {
	return EnvListItem{catalog.NewEnvEntry(v), catalog.NewHostOnly(v)}
}

// NewWorkspaceListItem is v as a list item.
func NewWorkspaceListItem(v catalog.Version) WorkspaceListItem {
	return WorkspaceListItem{catalog.NewWorkspaceEntry(v), catalog.NewHostOnly(v)}
}

// listJSON is vs, versions of kind, as `agora KIND list -o json` prints them.
func listJSON(kind catalog.Kind, vs []catalog.Version) (any, error) {
	switch kind {
	case catalog.KindCapability:
		return map[string]any{"capabilities": listItems(vs, NewCapabilityListItem)}, nil
	case catalog.KindSubagent:
		return map[string]any{"subagents": listItems(vs, NewSubagentListItem)}, nil
	case catalog.KindEnv:
		return map[string]any{"envs": listItems(vs, NewEnvListItem)}, nil
	case catalog.KindWorkspace:
		return map[string]any{"workspaces": listItems(vs, NewWorkspaceListItem)}, nil
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
