package dispatch

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/worker"
)

// stage is one dispatch's directory on the host: the bundle the worker verifies, the
// workspace, the out directory, and the live logs.
type stage struct {
	dir       string
	bundle    string
	workspace string
	out       string
	stdout    string
	stderr    string
}

func newStage(stateDir, id string) (*stage, error) {
	dir := filepath.Join(stateDir, id)
	s := &stage{
		dir: dir, bundle: filepath.Join(dir, "bundle"), workspace: filepath.Join(dir, "workspace"),
		out: filepath.Join(dir, "out"), stdout: filepath.Join(dir, stdoutLog), stderr: filepath.Join(dir, stderrLog),
	}
	for _, d := range []string{s.bundle, filepath.Join(s.bundle, "capabilities"), s.out} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("stage dispatch %s: %w", id, err)
		}
	}
	return s, nil
}

// removeWork deletes everything but the logs, which `dispatch logs -f` may still be reading.
func (s *stage) removeWork() {
	os.RemoveAll(s.bundle)
	os.RemoveAll(s.workspace)
	os.RemoveAll(s.out)
	os.RemoveAll(filepath.Join(s.dir, worker.InputsDir))
	os.RemoveAll(filepath.Join(s.dir, worker.GatewayDir))
}

// plan is what the worker needs, derived only from the record's pinned digests.
type plan struct {
	subagent     catalog.Version
	doc          catalog.SubagentDoc
	capabilities []catalog.Version
	env          map[string]string
	secretRefs   map[string]string // key -> sealed ref
	input        []byte
}

// loadPlan rebuilds the dispatch's inputs from its record. Every digest is pinned, so a
// supervisor started later (--detach) or elsewhere sees exactly what was accepted.
func (d *Dispatcher) loadPlan(ctx context.Context, r *Record) (*plan, error) {
	sub, err := d.Catalog.Resolve(ctx, catalog.KindSubagent, r.Subagent+"@"+string(r.SubagentDigest))
	if err != nil {
		return nil, err
	}
	content, err := d.Catalog.Content(sub)
	if err != nil {
		return nil, err
	}
	doc, err := catalog.ParseSubagentDoc(content)
	if err != nil {
		return nil, err
	}
	p := &plan{subagent: sub, doc: doc, env: map[string]string{}, secretRefs: map[string]string{}}
	for _, pin := range doc.Capabilities {
		v, err := d.Catalog.Resolve(ctx, catalog.KindCapability, pin.Name+"@"+string(pin.Digest))
		if err != nil {
			return nil, err
		}
		p.capabilities = append(p.capabilities, v)
	}
	for _, e := range r.Envs {
		v, err := d.Catalog.Resolve(ctx, catalog.KindEnv, e.Name+"@"+string(e.Digest))
		if err != nil {
			return nil, err
		}
		b, err := d.Catalog.Content(v)
		if err != nil {
			return nil, err
		}
		ed, err := catalog.ParseEnvDoc(b)
		if err != nil {
			return nil, err
		}
		// A later bundle's key wins, whether value or secret.
		for k, val := range ed.Values {
			p.env[k] = val
			delete(p.secretRefs, k)
		}
		for k, ref := range ed.Secrets {
			p.secretRefs[k] = ref
			delete(p.env, k)
		}
	}
	if p.input, err = d.Blobs.Get(r.InputDigest, maxInput*2); err != nil {
		return nil, err
	}
	return p, nil
}

// writeBundle copies the pinned content into the bundle directory and writes manifest.json.
func (d *Dispatcher) writeBundle(r *Record, p *plan, s *stage, agentTimeout, setupTimeout int) error {
	subContent, err := d.Catalog.Content(p.subagent)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(s.bundle, "subagent.json"), subContent, 0o600); err != nil {
		return err
	}
	m := worker.Manifest{
		Version:    1,
		DispatchID: r.ID,
		Subagent:   worker.Bundle{Name: p.subagent.Name, Digest: p.subagent.Digest, Path: "subagent.json"},
		Runtime:    p.doc.Runtime,
		Command:    p.doc.Command,
		InputJSON:  string(p.input),
		Env:        p.env,
		SecretKeys: catalog.SortedKeys(p.secretRefs),

		AgentTimeoutSeconds: agentTimeout,
		SetupTimeoutSeconds: setupTimeout,
		// Every isolated sandbox has its own PID namespace; `sandbox: none` shares the host's.
		PIDNamespace: r.Sandbox != "none",
	}
	var declared worker.Grants
	for _, c := range p.capabilities {
		data, err := d.Catalog.Content(c)
		if err != nil {
			return err
		}
		rel := worker.CapabilityPath(c.Digest)
		if err := os.WriteFile(filepath.Join(s.bundle, rel), data, 0o600); err != nil {
			return err
		}
		m.Capabilities = append(m.Capabilities, worker.Bundle{Name: c.Name, Digest: c.Digest, Path: rel})
		if g := c.Meta.Grants; g != nil {
			declared.Commands = append(declared.Commands, g.Commands...)
			declared.Tools = append(declared.Tools, g.Tools...)
			declared.Egress = append(declared.Egress, g.Egress...)
		}
	}
	declared.Commands, declared.Tools, declared.Egress = uniq(declared.Commands), uniq(declared.Tools), uniq(declared.Egress)
	m.Grants = declared
	if g := r.Grants; g != nil {
		// The dispatch's grant, narrowed at accept time from exactly these capabilities.
		m.Grants = worker.Grants{
			Commands: manifestCommands(declared.Commands, g.Commands),
			Tools:    uniq(g.Tools),
			Egress:   uniq(g.Egress),
		}
	}
	b, err := m.Marshal()
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(s.bundle, "manifest.json"), b, 0o600)
}

func uniq(ss []string) []string {
	set := map[string]bool{}
	out := []string{}
	for _, s := range ss {
		if !set[s] {
			set[s] = true
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

// prepareWorkspace checks the pinned revision out into the workspace, or makes it empty.
// --no-hardlinks: the worker can write to its clone's objects, which must not be the
// source repository's files.
func prepareWorkspace(ctx context.Context, r *Record, s *stage) error {
	if r.Repo == "" {
		return os.MkdirAll(s.workspace, 0o700)
	}
	if out, err := gitCmd(ctx, s.dir, "clone", "--quiet", "--no-hardlinks", "--no-checkout", "--", r.Repo, s.workspace).CombinedOutput(); err != nil {
		return fmt.Errorf("clone %s: %s", r.Repo, strings.TrimSpace(string(out)))
	}
	if out, err := gitCmd(ctx, s.workspace, "checkout", "--quiet", "--detach", r.Revision).CombinedOutput(); err != nil {
		return fmt.Errorf("check out %s: %s", r.Revision, strings.TrimSpace(string(out)))
	}
	return nil
}
