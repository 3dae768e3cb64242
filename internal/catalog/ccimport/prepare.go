package ccimport

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"

	yaml "go.yaml.in/yaml/v3"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/catalog/provision"
	"github.com/agora-dev/agora/internal/catalog/view"
	"github.com/agora-dev/agora/internal/digest"
	"github.com/agora-dev/agora/internal/runtime/claudert/claudedef"
	"github.com/agora-dev/agora/internal/strictyaml"
)

// capabilityDescription is the description of the capability an import makes for subagent
// name. It marks the capability as the import's: an import replaces only a capability that
// carries it, never one a person registered under the same name.
func capabilityDescription(name string) string {
	return fmt.Sprintf("Claude Code tools of subagent %s (agora subagent import)", name)
}

// capabilityYAML is the capability.yaml an import writes.
type capabilityYAML struct {
	Description string   `yaml:"description"`
	Tools       []string `yaml:"tools"`
	Commands    []string `yaml:"commands,omitempty"`
	Egress      []string `yaml:"egress,omitempty"`
}

// Prepare makes the pending catalog versions of the set: for each subagent the capability
// holding its grant, then the claude-code subagent pinning it. local holds capabilities of the
// same batch by name (a manifest's), as [provision.Writer.PrepareSubagent] takes them; allow
// are credential scanner opt-outs. An import never replaces a capability or subagent it did
// not make: one of the same name registered otherwise is a problem naming it. Every problem
// is returned at once, with file and line.
func (s *Set) Prepare(ctx context.Context, w *provision.Writer, local map[string]digest.Digest, allow []string) ([]*provision.Pending, error) {
	var pendings []*provision.Pending
	var errs strictyaml.Errors
	for _, im := range s.Agents {
		a := im.Agent
		fail := func(err error) {
			errs = append(errs, strictyaml.Error{File: a.File, Line: a.NameLine, Path: "name", Msg: err.Error()})
		}
		if err := checkOwned(ctx, w.Reader(), im); err != nil {
			fail(err)
			continue
		}
		files, err := capabilityFiles(im)
		if err != nil {
			fail(err)
			continue
		}
		capPending, err := w.PrepareCapabilityFiles(im.Capability, a.File+" (tools)", files, allow)
		if err != nil {
			fail(err)
			continue
		}
		batch := maps.Clone(local)
		if batch == nil {
			batch = map[string]digest.Digest{}
		}
		batch[im.Capability] = capPending.Digest
		sub, err := w.PrepareSubagent(ctx, a.Name, provision.SubagentSpec{
			Description: a.Description, SystemPrompt: a.Prompt, Runtime: claudedef.Name, Model: im.Model,
			Capabilities: []string{im.Capability},
		}, batch, allow)
		if err != nil {
			fail(err)
			continue
		}
		pendings = append(pendings, capPending, sub)
	}
	if len(errs) > 0 {
		errs.Sort()
		return nil, errs
	}
	return pendings, nil
}

// capabilityFiles is the one file of an imported subagent's capability.
func capabilityFiles(im *Imported) ([]catalog.File, error) {
	doc := capabilityYAML{Description: capabilityDescription(im.Agent.Name), Tools: im.Grant.Tools, Commands: im.Grant.Commands}
	for _, r := range im.Grant.Egress {
		doc.Egress = append(doc.Egress, r.String())
	}
	data, err := yaml.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("write the capability.yaml of %s: %w", im.Capability, err)
	}
	return []catalog.File{{Path: catalog.CapabilityFile, Mode: 0o644, Size: int64(len(data)), Data: data}}, nil
}

// checkOwned refuses to replace a capability or subagent of the import's names that the
// import did not make.
func checkOwned(ctx context.Context, r *view.Catalog, im *Imported) error {
	c, err := r.Resolve(ctx, catalog.KindCapability, im.Capability)
	switch {
	case errors.Is(err, view.ErrNotFound):
	case err != nil:
		return err
	case c.Meta.Description != capabilityDescription(im.Agent.Name):
		return fmt.Errorf("capability %q is registered and was not made by importing subagent %q; rename the subagent in its file", im.Capability, im.Agent.Name)
	}
	sub, err := r.Resolve(ctx, catalog.KindSubagent, im.Agent.Name)
	switch {
	case errors.Is(err, view.ErrNotFound):
		return nil
	case err != nil:
		return err
	}
	if sub.Meta.Runtime != claudedef.Name || len(sub.Meta.Capabilities) != 1 || sub.Meta.Capabilities[0].Name != im.Capability {
		return fmt.Errorf("subagent %q is registered and was not imported from a Claude Code file (an import holds only %s); rename the subagent in its file", im.Agent.Name, im.Capability)
	}
	return nil
}

// Summary is the audit entry that records an import as a whole, beside each version's own
// entry: the files by their path under the import's root and their digests, the subagent each
// became, and what changed. No host path is recorded.
func (s *Set) Summary(actor string, changes []provision.Change) *audit.Entry {
	counts := map[string]any{}
	for _, c := range changes {
		n, _ := counts[c.Action].(int64)
		counts[c.Action] = n + 1
	}
	return &audit.Entry{
		Actor:   actor,
		Kind:    entry.CatalogImport,
		Subject: entry.ClaudeAgents(filepath.Base(s.Root)),
		Details: map[string]any{"files": s.Files(), "changes": counts},
	}
}

// Files lists the set's subagent files for a record: path under the root, sha256, subagent.
func (s *Set) Files() []any {
	files := make([]any, 0, len(s.Agents))
	for _, im := range s.Agents {
		files = append(files, map[string]any{"file": im.Agent.Rel, "sha256": string(im.Agent.SHA256), "subagent": im.Agent.Name})
	}
	return files
}
