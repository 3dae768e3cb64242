package catalog

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agora-dev/agora/internal/budget"
	"github.com/agora-dev/agora/internal/jcs"
)

// docVersion is the format version of stored subagent and env documents.
const docVersion = 1

// SubagentDoc is the stored, hashed form of a subagent: exactly these fields as RFC 8785 JSON.
// The name is not part of it, so the same role under two names has one digest.
type SubagentDoc struct {
	Description  string   `json:"description"`
	Runtime      string   `json:"runtime"`
	Model        string   `json:"model"`
	SystemPrompt string   `json:"system_prompt"`
	Command      []string `json:"command"`
	Capabilities []Pin    `json:"capabilities"`
	// Budget is the most a dispatch of this subagent may spend; a dispatch may narrow it.
	// Zero sets none.
	Budget budget.Budget `json:"budget,omitzero"`
}

// docBudgetVersion is the format version of a subagent document with a budget. A reader that
// knows only version 1 would ignore "budget" and run the subagent without its limit; with
// version 2 it refuses the document instead. A document without a budget stays version 1,
// so every subagent registered before budgets existed keeps its bytes and digest.
const docBudgetVersion = 2

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
	m := map[string]any{
		"version":       docVersion,
		"description":   d.Description,
		"runtime":       d.Runtime,
		"model":         d.Model,
		"system_prompt": d.SystemPrompt,
		"command":       cmd,
		"capabilities":  caps,
	}
	if !d.Budget.IsZero() {
		if err := d.Budget.Validate(); err != nil {
			return nil, fmt.Errorf("subagent budget: %w", err)
		}
		m["version"] = docBudgetVersion
		m["budget"] = d.Budget.Canonical()
	}
	return jcs.Marshal(m)
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
	switch {
	case raw.Version == docVersion && raw.Budget.IsZero():
	case raw.Version == docBudgetVersion && !raw.Budget.IsZero():
		if err := raw.Budget.Validate(); err != nil {
			return SubagentDoc{}, fmt.Errorf("read subagent document: %w", err)
		}
	default:
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
	// Bindings are the secrets that never enter the sandbox: key -> where the egress proxy may
	// send the value ([Binding]). nil or empty: none.
	Bindings map[string]Binding `json:"bindings,omitempty"`
}

// envBoundVersion is the format version of an env document with bindings. A reader that knows
// only version 1 would ignore "bindings" and hand the secret's value to the sandbox; with
// version 2 it refuses the document instead. A document without bindings stays version 1, so
// every bundle registered before bindings existed keeps its bytes and digest.
const envBoundVersion = 2

// Marshal returns the canonical bytes of d. "bindings" appears only when d has some.
func (d EnvDoc) Marshal() ([]byte, error) {
	values, secrets := d.Values, d.Secrets
	if values == nil {
		values = map[string]string{}
	}
	if secrets == nil {
		secrets = map[string]string{}
	}
	doc := map[string]any{"version": docVersion, "values": values, "secrets": secrets}
	if len(d.Bindings) > 0 {
		bindings := make(map[string]any, len(d.Bindings))
		for k, b := range d.Bindings {
			hosts, headers := b.Hosts, b.Headers
			if hosts == nil {
				hosts = []string{}
			}
			if headers == nil {
				headers = []string{}
			}
			bindings[k] = map[string]any{"hosts": hosts, "headers": headers}
		}
		doc["version"], doc["bindings"] = envBoundVersion, bindings
	}
	return jcs.Marshal(doc)
}

// ParseEnvDoc reads stored env bundle bytes and checks the bindings (see [CheckBindings]): a
// document that binds a plain value or names an invalid host is refused, never half-read.
func ParseEnvDoc(b []byte) (EnvDoc, error) {
	var raw struct {
		Version int `json:"version"`
		EnvDoc
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return EnvDoc{}, fmt.Errorf("read env document: %w", err)
	}
	switch {
	case raw.Version == docVersion && raw.Bindings != nil:
		return EnvDoc{}, fmt.Errorf("read env document: version %d cannot have bindings", docVersion)
	case raw.Version == envBoundVersion && len(raw.Bindings) == 0:
		return EnvDoc{}, fmt.Errorf("read env document: version %d without bindings", envBoundVersion)
	case raw.Version != docVersion && raw.Version != envBoundVersion:
		return EnvDoc{}, fmt.Errorf("read env document: unsupported version %d", raw.Version)
	}
	if problems := CheckBindings(raw.Bindings, raw.Values, raw.Secrets); len(problems) > 0 {
		return EnvDoc{}, fmt.Errorf("read env document: %s", strings.Join(problems, "; "))
	}
	return raw.EnvDoc, nil
}
