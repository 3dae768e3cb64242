package catalog

import (
	"encoding/json"
	"fmt"

	"github.com/agora-dev/agora/internal/jcs"
)

// docVersion is the format version of stored subagent and env documents.
const docVersion = 1

// Runtimes are the agent runtimes a subagent may name.
var Runtimes = []string{"exec", "claude-code", "openai"}

// SubagentDoc is the stored, hashed form of a subagent: exactly these fields as RFC 8785 JSON.
// The name is not part of it, so the same role under two names has one digest.
type SubagentDoc struct {
	Description  string   `json:"description"`
	Runtime      string   `json:"runtime"`
	Model        string   `json:"model"`
	SystemPrompt string   `json:"system_prompt"`
	Command      []string `json:"command"`
	Capabilities []Pin    `json:"capabilities"`
}

// Marshal returns the canonical bytes of d.
func (d SubagentDoc) Marshal() ([]byte, error) {
	caps := make([]any, len(d.Capabilities))
	for i, p := range d.Capabilities {
		caps[i] = map[string]any{"name": p.Name, "digest": string(p.Digest)}
	}
	cmd := d.Command
	if cmd == nil {
		cmd = []string{}
	}
	return jcs.Marshal(map[string]any{
		"version":       docVersion,
		"description":   d.Description,
		"runtime":       d.Runtime,
		"model":         d.Model,
		"system_prompt": d.SystemPrompt,
		"command":       cmd,
		"capabilities":  caps,
	})
}

// ParseSubagentDoc reads stored subagent bytes.
func ParseSubagentDoc(b []byte) (SubagentDoc, error) {
	var raw struct {
		Version int `json:"version"`
		SubagentDoc
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return SubagentDoc{}, fmt.Errorf("read subagent document: %w", err)
	}
	if raw.Version != docVersion {
		return SubagentDoc{}, fmt.Errorf("read subagent document: unsupported version %d", raw.Version)
	}
	return raw.SubagentDoc, nil
}

// EnvDoc is the stored, hashed form of an env bundle. Secrets appear only as references
// (keyed MACs of the value, see secret.Sealer.Ref), so the digest changes when a secret does
// without revealing anything about it.
type EnvDoc struct {
	Values  map[string]string `json:"values"`
	Secrets map[string]string `json:"secrets"` // key -> sealed secret reference
	// Bindings bind secrets to hosts: the sandbox sees a placeholder, and the egress proxy
	// sends the value to those hosts only. Absent from the document when empty.
	Bindings map[string]Binding `json:"bindings,omitempty"`
}

// Binding is where one secret's value may go.
type Binding struct {
	// Hosts are host patterns as in a grant's egress: a name, "*.domain" or an IP literal.
	Hosts []string `json:"hosts"`
	// Headers are header names the proxy swaps the placeholder in, besides Authorization.
	Headers []string `json:"headers,omitempty"`
}

// Marshal returns the canonical bytes of d.
func (d EnvDoc) Marshal() ([]byte, error) {
	values, secrets := d.Values, d.Secrets
	if values == nil {
		values = map[string]string{}
	}
	if secrets == nil {
		secrets = map[string]string{}
	}
	return jcs.Marshal(map[string]any{"version": docVersion, "values": values, "secrets": secrets})
}

// ParseEnvDoc reads stored env bundle bytes.
func ParseEnvDoc(b []byte) (EnvDoc, error) {
	var raw struct {
		Version int `json:"version"`
		EnvDoc
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return EnvDoc{}, fmt.Errorf("read env document: %w", err)
	}
	if raw.Version != docVersion {
		return EnvDoc{}, fmt.Errorf("read env document: unsupported version %d", raw.Version)
	}
	return raw.EnvDoc, nil
}
