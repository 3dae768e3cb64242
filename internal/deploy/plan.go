package deploy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/catalog/ccimport"
	"github.com/agora-dev/agora/internal/catalog/provision"
	"github.com/agora-dev/agora/internal/digest"
	"github.com/agora-dev/agora/internal/strictyaml"
)

// maxFileInput caps prompt, subagent and secret files a manifest points at.
const maxFileInput = 2 << 20

// Source is a manifest and where it came from.
type Source struct {
	Path   string // as given by the user, for messages
	Dir    string // relative paths in the manifest are resolved against this
	Digest digest.Digest
	M      *Manifest
	pos    *strictyaml.Positions
	// imports are the sets the manifest's imports loaded, in order, set by prepare.
	imports []sourceImport
}

// sourceImport is one import entry's files, by the entry's path (import[0]).
type sourceImport struct {
	path string
	set  *ccimport.Set
}

// load reads and parses the manifest at path and returns what decoded along with its problems.
func load(path string) (*Source, strictyaml.Errors, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read manifest: %w", err)
	}
	if fi.Size() > MaxSize {
		return nil, nil, fmt.Errorf("manifest %s is larger than %d bytes", path, MaxSize)
	}
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read manifest: %w", err)
	}
	m, pos, errs, err := parse(path, src)
	if err != nil {
		return nil, nil, err
	}
	return &Source{Path: path, Dir: filepath.Dir(path), Digest: digest.Sum(src), M: m, pos: pos}, errs, nil
}

// Check loads the manifest at path and prepares every entry, reporting the manifest's own
// problems and every entry's (files, credentials, the catalog) together, so one pass fixes
// them all. An entry with a problem in the manifest itself is not prepared.
func Check(ctx context.Context, path string, w *provision.Writer, getenv func(string) string) (*Source, []*provision.Pending, error) {
	s, errs, err := load(path)
	if err != nil {
		return nil, nil, err
	}
	skip := map[string]bool{}
	for _, e := range errs {
		if i := strings.Index(e.Path, "]"); i > 0 {
			skip[e.Path[:i+1]] = true // capabilities[2]
		}
	}
	pendings, err := s.prepare(ctx, w, getenv, skip)
	var more strictyaml.Errors
	switch {
	case errors.As(err, &more):
		errs = append(errs, more...)
	case err != nil:
		return nil, nil, err
	}
	if len(errs) > 0 {
		errs.Sort()
		if n := len(errs) - MaxErrors; n > 0 {
			errs = append(errs[:MaxErrors:MaxErrors], strictyaml.Error{File: path,
				Msg: fmt.Sprintf("and %d more problems not listed: the first %d are; fix them and check again", n, MaxErrors)})
		}
		return nil, nil, errs
	}
	return s, pendings, nil
}

// MaxErrors is how many problems a refused manifest lists, in document order; the rest are
// counted. (The decoder stops at its own limit of 100 first.)
const MaxErrors = 100

// prepare validates every declared entry but those in skip (by path, such as capabilities[2])
// against the catalog and the files it names, and returns the pending versions in apply order
// (capabilities, subagents, envs, workspaces). Every entry is checked even after one fails; all
// problems are returned together.
func (s *Source) prepare(ctx context.Context, w *provision.Writer, getenv func(string) string, skip map[string]bool) ([]*provision.Pending, error) {
	var pendings []*provision.Pending
	var errs strictyaml.Errors
	fail := func(path string, err error) {
		var se strictyaml.Errors
		if errors.As(err, &se) {
			errs = append(errs, se...)
			return
		}
		errs = append(errs, s.pos.Errorf(path, "%v", err))
	}
	local := map[string]digest.Digest{}
	for i, c := range s.M.Capabilities {
		if skip[fmt.Sprintf("capabilities[%d]", i)] {
			continue
		}
		p, err := w.PrepareCapability(c.Name, s.abs(c.From), c.AllowCredentialPatterns)
		if err != nil {
			fail(fmt.Sprintf("capabilities[%d]", i), err)
			continue
		}
		local[c.Name] = p.Digest
		pendings = append(pendings, p)
	}
	for i, sa := range s.M.Subagents {
		path := fmt.Sprintf("subagents[%d]", i)
		if skip[path] {
			continue
		}
		spec, err := s.subagentSpec(sa)
		if err != nil {
			fail(path, err)
			continue
		}
		p, err := w.PrepareSubagent(ctx, sa.Name, spec, local, sa.AllowCredentialPatterns)
		if err != nil {
			fail(path, err)
			continue
		}
		pendings = append(pendings, p)
	}
	s.imports = nil
	for i, im := range s.M.Import {
		path := fmt.Sprintf("import[%d]", i)
		if skip[path] {
			continue
		}
		p, err := s.prepareImport(ctx, w, path, im, local)
		if err != nil {
			fail(path, err)
			continue
		}
		pendings = append(pendings, p...)
	}
	for i, e := range s.M.Envs {
		path := fmt.Sprintf("envs[%d]", i)
		if skip[path] {
			continue
		}
		secrets := map[string][]byte{}
		ok := true
		for _, k := range catalog.SortedKeys(e.Secrets) { // sorted, so errors come in a stable order
			v, err := s.readSecret(e.Secrets[k], getenv)
			if err != nil {
				fail(path+".secrets."+k, err)
				ok = false
				continue
			}
			secrets[k] = v
		}
		if !ok {
			continue
		}
		p, err := w.PrepareEnvSpec(e.Name, provision.EnvSpec{Values: e.Values, Secrets: secrets, Bindings: bindings(e.Bind)}, e.AllowCredentialPatterns)
		if err != nil {
			fail(path, err)
			continue
		}
		pendings = append(pendings, p)
	}
	for i, ws := range s.M.Workspaces {
		if skip[fmt.Sprintf("workspaces[%d]", i)] {
			continue
		}
		p, err := w.PrepareWorkspace(ctx, ws.Name, provision.WorkspaceSpec{
			Repo: s.abs(ws.Repo), Revisions: ws.Revisions, DefaultRevision: ws.DefaultRevision, Description: ws.Description,
		})
		if err != nil {
			fail(fmt.Sprintf("workspaces[%d]", i), err)
			continue
		}
		pendings = append(pendings, p)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return pendings, nil
}

// prepareImport loads and prepares the Claude Code subagent files of one import entry. A name
// it would register that the manifest declares too, or that an earlier import makes, is a
// problem at both: a manifest says each name once.
func (s *Source) prepareImport(ctx context.Context, w *provision.Writer, path string, im Import, local map[string]digest.Digest) ([]*provision.Pending, error) {
	var defaults []ccimport.Tool
	if im.DefaultTools != "" {
		d, err := ccimport.ParseDefaultTools(im.DefaultTools)
		if err != nil {
			return nil, err
		}
		defaults = d
	}
	set, err := ccimport.Load(s.abs(im.From), defaults)
	if err != nil {
		return nil, err
	}
	var errs strictyaml.Errors
	for _, a := range set.Agents {
		for _, c := range []struct {
			kind catalog.Kind
			name string
		}{{catalog.KindSubagent, a.Agent.Name}, {catalog.KindCapability, a.Capability}} {
			if where := s.declares(c.kind, c.name); where != "" {
				errs = append(errs, strictyaml.Error{File: a.Agent.File, Line: a.Agent.NameLine, Path: "name",
					Msg: fmt.Sprintf("%s %q that %s imports is also declared at %s", c.kind, c.name, path, where)})
			}
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	pendings, err := set.Prepare(ctx, w, local, im.AllowCredentialPatterns)
	if err != nil {
		return nil, err
	}
	s.imports = append(s.imports, sourceImport{path: path, set: set})
	return pendings, nil
}

// declares says where the manifest, or an import prepared before, declares kind name: a
// path such as subagents[2] or import[0], or "".
func (s *Source) declares(kind catalog.Kind, name string) string {
	switch kind {
	case catalog.KindSubagent:
		for i, sa := range s.M.Subagents {
			if sa.Name == name {
				return fmt.Sprintf("subagents[%d]", i)
			}
		}
	case catalog.KindCapability:
		for i, c := range s.M.Capabilities {
			if c.Name == name {
				return fmt.Sprintf("capabilities[%d]", i)
			}
		}
	}
	for _, im := range s.imports {
		for _, a := range im.set.Agents {
			if kind == catalog.KindSubagent && a.Agent.Name == name || kind == catalog.KindCapability && a.Capability == name {
				return fmt.Sprintf("%s (%s)", im.path, a.Agent.File)
			}
		}
	}
	return ""
}

// Imports are the Claude Code subagent files the manifest's imports read, each import's
// mapped, after a successful [Check] or its prepare.
func (s *Source) Imports() []*ccimport.Set {
	sets := make([]*ccimport.Set, len(s.imports))
	for i, im := range s.imports {
		sets[i] = im.set
	}
	return sets
}

// bindings converts a manifest's bind to the catalog's form; PrepareEnvSpec normalises it.
func bindings(bind map[string]Binding) map[string]catalog.Binding {
	if len(bind) == 0 {
		return nil
	}
	out := make(map[string]catalog.Binding, len(bind))
	for k, b := range bind {
		out[k] = catalog.Binding{Hosts: b.Hosts, Headers: b.Headers}
	}
	return out
}

func (s *Source) abs(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(s.Dir, p)
}

func (s *Source) subagentSpec(sa Subagent) (provision.SubagentSpec, error) {
	if sa.From != "" {
		path := s.abs(sa.From)
		src, err := readFile(path)
		if err != nil {
			return provision.SubagentSpec{}, err
		}
		var spec provision.SubagentSpec
		if _, err := strictyaml.Decode(path, src, &spec); err != nil {
			return spec, err
		}
		return spec, readPrompt(&spec, filepath.Dir(path))
	}
	spec := provision.SubagentSpec{
		Description: sa.Description, SystemPrompt: sa.SystemPrompt, PromptFile: sa.PromptFile,
		Runtime: sa.Runtime, Model: sa.Model, Command: sa.Command, Capabilities: sa.Capabilities,
		Budget: sa.Budget,
	}
	return spec, readPrompt(&spec, s.Dir)
}

func readPrompt(spec *provision.SubagentSpec, dir string) error {
	if spec.PromptFile == "" {
		return nil
	}
	if spec.SystemPrompt != "" {
		return fmt.Errorf("system_prompt and prompt_file cannot both be set")
	}
	p := spec.PromptFile
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	b, err := readFile(p)
	if err != nil {
		return err
	}
	spec.SystemPrompt, spec.PromptFile = string(b), ""
	return nil
}

func (s *Source) readSecret(src SecretSource, getenv func(string) string) ([]byte, error) {
	if src.FromEnv != "" {
		v := getenv(src.FromEnv)
		if v == "" {
			return nil, fmt.Errorf("from_env: the environment variable %s is unset or empty", src.FromEnv)
		}
		return []byte(v), nil
	}
	b, err := readFile(s.abs(src.FromFile))
	if err != nil {
		return nil, fmt.Errorf("from_file: %w", err)
	}
	b = bytes.TrimSuffix(b, []byte("\n"))
	return bytes.TrimSuffix(b, []byte("\r")), nil
}

func readFile(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	if fi.Size() > maxFileInput {
		return nil, fmt.Errorf("%s is %d bytes, over the %d-byte limit", path, fi.Size(), maxFileInput)
	}
	return os.ReadFile(path)
}

// Summary is the audit entry that records an apply as a whole.
func (s *Source) Summary(actor string, changes []provision.Change, prune bool) *audit.Entry {
	counts := map[string]any{}
	for _, c := range changes {
		n, _ := counts[c.Action].(int64)
		counts[c.Action] = n + 1
	}
	details := map[string]any{"manifest_digest": string(s.Digest), "prune": prune, "changes": counts}
	if len(s.imports) > 0 {
		// The Claude Code files the imports read, by digest: the manifest names only their
		// directories.
		var files []any
		for _, im := range s.imports {
			files = append(files, im.set.Files()...)
		}
		details["imported_files"] = files
	}
	return &audit.Entry{
		Actor:   actor,
		Kind:    entry.CatalogApply,
		Subject: entry.Manifest(filepath.Base(s.Path)),
		Details: details,
	}
}
