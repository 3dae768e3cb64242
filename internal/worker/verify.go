package worker

import (
	"github.com/agora-dev/agora/internal/capped"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/runtime/runtimes"

	"context"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/digest"
	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// capability is one verified capability archive.
type capability struct {
	name   string
	files  []catalog.File
	grants catalog.CapabilityDoc
}

// verify reads the manifest, checks the digest of the subagent document and of every
// capability archive, checks that the document agrees with the manifest, and that the
// manifest grants nothing the capabilities do not.
func (r *runner) verify(ctx context.Context) *failure {
	bundle := filepath.Join(r.opts.Root, wire.BundleDir)
	b, err := capped.NoFollow(filepath.Join(bundle, wire.ManifestFile), wire.MaxManifestSize)
	if err != nil {
		return fail(lifecycle.ReasonIntegrityFailed, "verify: %v", err)
	}
	m, err := wire.ParseManifest(b)
	if err != nil {
		return fail(lifecycle.ReasonIntegrityFailed, "verify: %v", err)
	}
	r.man = m

	docBytes, err := capped.NoFollow(filepath.Join(bundle, m.Subagent.Path), maxSubagentDocSize)
	if err != nil {
		return fail(lifecycle.ReasonIntegrityFailed, "verify subagent %q: %v", m.Subagent.Name, err)
	}
	if got := digest.Sum(docBytes); got != m.Subagent.Digest {
		return fail(lifecycle.ReasonIntegrityFailed, "verify subagent %q: content is %s, want %s", m.Subagent.Name, got, m.Subagent.Digest)
	}
	doc, err := catalog.ParseSubagentDoc(docBytes)
	if err != nil {
		return fail(lifecycle.ReasonIntegrityFailed, "verify subagent %q: %v", m.Subagent.Name, err)
	}
	r.doc = doc
	if doc.Runtime != m.Runtime {
		return fail(lifecycle.ReasonIntegrityFailed, "verify subagent %q: runtime is %q, manifest says %q", m.Subagent.Name, doc.Runtime, m.Runtime)
	}
	if !slices.Equal(doc.Command, m.Command) {
		return fail(lifecycle.ReasonIntegrityFailed, "verify subagent %q: command is %q, manifest says %q", m.Subagent.Name, doc.Command, m.Command)
	}
	if len(doc.Capabilities) != len(m.Capabilities) {
		return fail(lifecycle.ReasonIntegrityFailed, "verify subagent %q: it pins %d capabilities, manifest lists %d", m.Subagent.Name, len(doc.Capabilities), len(m.Capabilities))
	}
	for i, pin := range doc.Capabilities {
		if c := m.Capabilities[i]; pin.Name != c.Name || pin.Digest != c.Digest {
			return fail(lifecycle.ReasonIntegrityFailed, "verify subagent %q: capability %d is %s@%s, manifest says %s@%s", m.Subagent.Name, i, pin.Name, pin.Digest, c.Name, c.Digest)
		}
	}

	var union grant.Set
	for _, c := range m.Capabilities {
		data, err := capped.NoFollow(filepath.Join(bundle, c.Path), maxArchiveSize)
		if err != nil {
			return fail(lifecycle.ReasonIntegrityFailed, "verify capability %q: %v", c.Name, err)
		}
		if got := digest.Sum(data); got != c.Digest {
			return fail(lifecycle.ReasonIntegrityFailed, "verify capability %q: content is %s, want %s", c.Name, got, c.Digest)
		}
		// The content cannot be longer than the archive; the host enforced its own size
		// limit when the capability was registered.
		files, err := catalog.ReadStored(data)
		if err != nil {
			return fail(lifecycle.ReasonIntegrityFailed, "verify capability %q: %v", c.Name, err)
		}
		g, err := readGrants(files)
		if err != nil {
			return fail(lifecycle.ReasonIntegrityFailed, "verify capability %q: %v", c.Name, err)
		}
		r.caps = append(r.caps, capability{name: c.Name, files: files, grants: g})
		union = union.Union(g.Set)
	}
	for _, l := range []struct {
		name       string
		got, union []string
	}{
		{"commands", m.Grants.Commands, union.Commands},
		{"tools", m.Grants.Tools, union.Tools},
	} {
		for _, g := range l.got {
			if !slices.Contains(l.union, g) {
				return fail(lifecycle.ReasonIntegrityFailed, "verify: manifest grants %s %q, which no capability declares", l.name, g)
			}
		}
	}
	// An egress rule may be narrower than the one a capability declares (a dispatch narrowed
	// it), never wider.
	if _, err := union.Narrow(grant.Set{Egress: m.Grants.Egress}); err != nil {
		return fail(lifecycle.ReasonIntegrityFailed, "verify: manifest grants egress no capability declares: %v", err)
	}
	// Approvals may be added by a dispatch, never dropped: every rule a capability declares
	// holds its calls.
	for _, a := range grant.NormalApprove(union.Approve) {
		if !slices.Contains(grant.NormalApprove(m.Grants.Approve), a) {
			return fail(lifecycle.ReasonIntegrityFailed, "verify: capability approve rule %q is not in the manifest's grant", a.String())
		}
	}

	rt, err := runtimeFor(m.Runtime)
	if err != nil {
		return fail(lifecycle.ReasonWorkerFailed, "verify: %v", err)
	}
	r.rt = rt
	// What the worker prepares for the runtime is read off its description, so no runtime
	// is named here (a new one needs no line in the worker).
	desc, _ := runtimes.Lookup(m.Runtime) // runtimeFor found it
	if desc.Model.API != "" {
		// The model runtimes reach their model only through the host's gateway.
		if r.gateway, err = gatewaySocket(r.opts.Root); err != nil {
			return fail(lifecycle.ReasonWorkerFailed, "verify: runtime %q: %v", m.Runtime, err)
		}
	}
	if desc.MCP {
		if fl := r.findMCPConfig(); fl != nil {
			return fl
		}
	}
	// A learn dispatch's command was recorded at accept as tool.would_deny instead.
	if desc.Needs.Command && !m.Learn && !grant.CommandAllowed(m.Grants.Commands, m.Command) {
		return fail(lifecycle.ReasonDenied, "verify: command %q matches no commands pattern granted by the capabilities", m.Command)
	}
	return nil
}

// MCPConfigFile is the file at the root of a capability that holds its MCP servers, in the
// shape claude's --mcp-config takes ({"mcpServers": {...}}). The claude-code runtime loads it
// from the verified archive, never from the workspace, and pre-approves its servers' tools.
const MCPConfigFile = "mcp.json"

// readGrants parses the capability.yaml of an archive; an archive without one grants nothing.
func readGrants(files []catalog.File) (catalog.CapabilityDoc, error) {
	f, ok := findFile(files, catalog.CapabilityFile)
	if !ok {
		return catalog.CapabilityDoc{}, nil
	}
	if f.LinkTarget != "" {
		return catalog.CapabilityDoc{}, fmt.Errorf("%s is a symlink", catalog.CapabilityFile)
	}
	return catalog.ParseCapabilityDoc(catalog.CapabilityFile, f.Data, files)
}

func findFile(files []catalog.File, p string) (catalog.File, bool) {
	for _, f := range files {
		if f.Path == p {
			return f, true
		}
	}
	return catalog.File{}, false
}

// findMCPConfig takes the MCP config of the one capability that declares one (a regular
// file [MCPConfigFile] at its root). Two would leave it ambiguous which servers the role
// has, so that is refused.
func (r *runner) findMCPConfig() *failure {
	from := ""
	for _, c := range r.caps {
		f, ok := findFile(c.files, MCPConfigFile)
		if !ok {
			continue
		}
		if f.LinkTarget != "" {
			return fail(lifecycle.ReasonIntegrityFailed, "verify capability %q: %s is a symlink", c.name, MCPConfigFile)
		}
		if from != "" {
			return fail(lifecycle.ReasonWorkerFailed, "verify: capabilities %q and %q both declare an MCP config (%s); a subagent may hold one", from, c.name, MCPConfigFile)
		}
		from, r.mcpConfig = c.name, f.Data
	}
	return nil
}
