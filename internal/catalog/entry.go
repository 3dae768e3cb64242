package catalog

import (
	"time"

	"github.com/agora-dev/agora/internal/budget"
)

// What a catalog version looks like where it is shown: one Go type per kind,
// which `agora KIND list -o json` prints and the MCP server's agora_*_list tools answer, so
// the CLI and MCP agree on every member's name and value. The stored [Meta] stays as stored
// (older and newer agora read it back); these are views of it. A name and its version are
// separate members, and a referenced capability is a [Pin] {name, digest}. None holds a
// prompt, a command, a value, a secret reference or a host path: the catalog's Meta never
// holds one. What only the host's CLI shows besides is [HostOnly].

// CapabilityEntry is a capability version as lists show it.
type CapabilityEntry struct {
	Name         string    `json:"name"`
	Digest       string    `json:"digest"`
	RegisteredAt time.Time `json:"registered_at"`
	Description  string    `json:"description"`
}

// SubagentEntry is a subagent version as lists show it: its runtime and the capability
// versions it was registered with, never its prompt or command.
type SubagentEntry struct {
	CapabilityEntry
	Runtime      string `json:"runtime"`
	Capabilities []Pin  `json:"capabilities"`
}

// EnvEntry is an env bundle version as lists show it: the keys of its values and secrets,
// never a value or a secret's reference.
type EnvEntry struct {
	CapabilityEntry
	ValueKeys  []string `json:"value_keys"`
	SecretKeys []string `json:"secret_keys"`
}

// WorkspaceEntry is a workspace version as lists show it: its revision patterns and default,
// never the repository's path (which is in the content, not in Meta).
type WorkspaceEntry struct {
	CapabilityEntry
	Revisions       []string `json:"revisions"`
	DefaultRevision string   `json:"default_revision"`
}

// HostOnly is what the host's `agora KIND list -o json` shows of a version besides its entry,
// and the MCP server never does: who registered it and its size, and the stored policy a
// model is not shown (a capability's capability.yaml and file count, a subagent's model and
// budget, an env bundle's bindings, the credential scanner's opt-outs). A member a kind does
// not have is left out.
type HostOnly struct {
	Size                      int64              `json:"size"`
	RegisteredBy              string             `json:"registered_by"`
	FileCount                 int                `json:"file_count,omitempty"`
	CapabilityDoc             *CapabilityDoc     `json:"grants,omitempty"`
	Model                     string             `json:"model,omitempty"`
	Budget                    *budget.Budget     `json:"budget,omitempty"`
	Bindings                  map[string]Binding `json:"bindings,omitempty"`
	AllowedCredentialPatterns []string           `json:"allowed_credential_patterns,omitempty"`
}

// NewCapabilityEntry is v as lists show it.
func NewCapabilityEntry(v Version) CapabilityEntry {
	return CapabilityEntry{Name: v.Name, Digest: string(v.Digest), RegisteredAt: v.RegisteredAt.UTC(), Description: v.Meta.Description}
}

// NewSubagentEntry is v (a subagent) as lists show it.
func NewSubagentEntry(v Version) SubagentEntry {
	return SubagentEntry{CapabilityEntry: NewCapabilityEntry(v), Runtime: v.Meta.Runtime, Capabilities: listCopy(v.Meta.Capabilities)}
}

// NewEnvEntry is v (an env bundle) as lists show it.
func NewEnvEntry(v Version) EnvEntry {
	return EnvEntry{CapabilityEntry: NewCapabilityEntry(v), ValueKeys: listCopy(v.Meta.ValueKeys), SecretKeys: listCopy(v.Meta.SecretKeys)}
}

// NewWorkspaceEntry is v (a workspace) as lists show it.
func NewWorkspaceEntry(v Version) WorkspaceEntry {
	return WorkspaceEntry{CapabilityEntry: NewCapabilityEntry(v), Revisions: listCopy(v.Meta.Revisions), DefaultRevision: v.Meta.DefaultRevision}
}

// NewHostOnly is what only the host shows of v.
func NewHostOnly(v Version) HostOnly {
	return HostOnly{
		Size: v.Size, RegisteredBy: v.RegisteredBy, FileCount: v.Meta.FileCount, CapabilityDoc: v.Meta.CapabilityDoc,
		Model: v.Meta.Model, Budget: v.Meta.Budget, Bindings: v.Meta.Bindings,
		AllowedCredentialPatterns: v.Meta.AllowedCredentialPatterns,
	}
}

// listCopy is a copy of s, empty rather than nil: a list member is always a JSON list.
func listCopy[T any](s []T) []T {
	return append(make([]T, 0, len(s)), s...)
}
