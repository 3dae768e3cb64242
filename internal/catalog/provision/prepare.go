package provision

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/agora-dev/agora/internal/budget"
	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/digest"
	"github.com/agora-dev/agora/internal/runtime/runtimes"
	"github.com/agora-dev/agora/internal/secret"
	"github.com/agora-dev/agora/internal/secret/redact"
	"github.com/agora-dev/agora/internal/workspace"
)

// Size limits on what a person can register. They are generous for real use and keep a
// mistake (a binary as a prompt) from becoming a stored artifact.
const (
	maxPromptSize      = 1 << 20
	maxDescriptionSize = MaxDescriptionSize
	maxModelSize       = 256
	maxEnvValueSize    = 64 << 10
	maxSecretSize      = 64 << 10
	maxEnvKeys         = 256
	maxCommandArgs     = 256
)

// MaxDescriptionSize caps a subagent's description: one line saying what it is for.
const MaxDescriptionSize = 1 << 10

// CredentialError reports credentials found in content being registered.
type CredentialError struct {
	Findings []CredentialFinding
}

// CredentialFinding locates one credential: where, which pattern, and the first characters.
type CredentialFinding struct {
	Where   string // file path, or "value FOO", or "system_prompt"
	Line    int
	Pattern string
	Preview string
}

func (e *CredentialError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "refusing to register: %d credential(s) found", len(e.Findings))
	for _, f := range e.Findings {
		fmt.Fprintf(&b, "\n  %s:%d: %s (%s)", f.Where, f.Line, f.Pattern, f.Preview)
	}
	return b.String()
}

// Hint says how to proceed when a finding is a false positive.
func (e *CredentialError) Hint() string {
	var pats []string
	for _, f := range e.Findings {
		if !slices.Contains(pats, f.Pattern) {
			pats = append(pats, f.Pattern)
		}
	}
	return "move real credentials into an env bundle secret (agora env register --secret KEY=env:VAR); if this is a false positive, pass --allow-credential-pattern " +
		strings.Join(pats, ",") + " (recorded on the version)"
}

func scanInto(findings *[]CredentialFinding, where string, data []byte, allow []string) {
	for _, f := range secret.Scan(data, allow) {
		*findings = append(*findings, CredentialFinding{Where: where, Line: f.Line, Pattern: f.Pattern, Preview: f.Preview})
	}
}

// PrepareCapability reads dir (capability.yaml optional), checks its grants, scans every file
// for credentials and builds the deterministic archive.
func (w *Writer) PrepareCapability(name, dir string, allow []string) (*Pending, error) {
	if err := catalog.CheckName(catalog.KindCapability, name); err != nil {
		return nil, err
	}
	if err := secret.ValidatePatternNames(allow); err != nil {
		return nil, err
	}
	files, err := catalog.ReadDir(dir, w.limits)
	if err != nil {
		return nil, err
	}
	return w.prepareCapability(name, filepath.Join(dir, catalog.CapabilityFile), files, allow)
}

// PrepareCapabilityFiles is [Writer.PrepareCapability] for files made in memory (the
// capability.yaml an import writes for a subagent's grant); where names them in messages.
func (w *Writer) PrepareCapabilityFiles(name, where string, files []catalog.File, allow []string) (*Pending, error) {
	if err := catalog.CheckName(catalog.KindCapability, name); err != nil {
		return nil, err
	}
	if err := secret.ValidatePatternNames(allow); err != nil {
		return nil, err
	}
	return w.prepareCapability(name, where, files, allow)
}

// prepareCapability checks the grants of files (capability.yaml, named file in messages),
// scans them for credentials and builds the archive.
func (w *Writer) prepareCapability(name, file string, files []catalog.File, allow []string) (*Pending, error) {
	var grantSrc []byte
	for _, f := range files {
		if f.Path == catalog.CapabilityFile && f.LinkTarget == "" {
			grantSrc = f.Data
		}
	}
	grants, err := catalog.ParseCapabilityDoc(file, grantSrc, files)
	if err != nil {
		return nil, err
	}
	var findings []CredentialFinding
	for _, f := range files {
		if f.LinkTarget == "" {
			scanInto(&findings, f.Path, f.Data, allow)
		}
	}
	if len(findings) > 0 {
		return nil, &CredentialError{Findings: findings}
	}
	data, err := catalog.Archive(files)
	if err != nil {
		return nil, err
	}
	sum := digest.Sum(data)
	w.overlaysMu.Lock()
	w.overlays[sum] = catalog.OverlayFiles(grants, files)
	w.overlaysMu.Unlock()
	return &Pending{
		Kind: catalog.KindCapability, Name: name, Content: data, Digest: sum,
		Meta: catalog.Meta{
			Description: grants.Description, CapabilityDoc: &grants, FileCount: len(files),
			AllowedCredentialPatterns: allow,
		},
	}, nil
}

// SubagentSpec is a subagent as a person writes it (flags, a YAML file or a manifest entry).
type SubagentSpec struct {
	Description  string   `yaml:"description"`
	SystemPrompt string   `yaml:"system_prompt"`
	PromptFile   string   `yaml:"prompt_file"` // read by the caller into SystemPrompt
	Runtime      string   `yaml:"runtime"`
	Model        string   `yaml:"model"`
	Command      []string `yaml:"command"`      // exec runtime: argv
	Capabilities []string `yaml:"capabilities"` // names or name@sha256:HEX
	// Budget is the most a dispatch of this subagent may spend (tokens, usd, model_calls).
	Budget budget.Budget `yaml:"budget"`
}

// PrepareSubagent checks spec and pins its capabilities by digest: a pinned reference as given,
// a name declared in the same batch (local) to that digest, any other name to its latest
// version.
func (w *Writer) PrepareSubagent(ctx context.Context, name string, spec SubagentSpec, local map[string]digest.Digest, allow []string) (*Pending, error) {
	if err := catalog.CheckName(catalog.KindSubagent, name); err != nil {
		return nil, err
	}
	if err := secret.ValidatePatternNames(allow); err != nil {
		return nil, err
	}
	spec.Runtime = cmp.Or(spec.Runtime, runtimes.Default)
	var problems []string
	if rt, ok := runtimes.Lookup(spec.Runtime); ok {
		problems = runtimes.Problems(rt, spec.Command, spec.Model, spec.SystemPrompt)
	} else {
		problems = append(problems, fmt.Sprintf("runtime %q is not one of %s", spec.Runtime, strings.Join(runtimes.Names(), ", ")))
	}
	if len(spec.SystemPrompt) > maxPromptSize {
		problems = append(problems, fmt.Sprintf("system prompt is %d bytes, over the %d-byte limit", len(spec.SystemPrompt), maxPromptSize))
	}
	if len(spec.Description) > maxDescriptionSize {
		problems = append(problems, fmt.Sprintf("description is over %d bytes", maxDescriptionSize))
	}
	if len(spec.Model) > maxModelSize || strings.ContainsAny(spec.Model, "\x00\n") {
		problems = append(problems, "model is not a plausible model name")
	}
	if err := spec.Budget.Validate(); err != nil {
		problems = append(problems, err.Error())
	}
	if len(spec.Command) > maxCommandArgs {
		problems = append(problems, fmt.Sprintf("command has more than %d arguments", maxCommandArgs))
	}
	for _, a := range spec.Command {
		if strings.ContainsRune(a, 0) {
			problems = append(problems, "command contains a NUL byte")
			break
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("subagent %q: %s", name, strings.Join(problems, "; "))
	}
	var findings []CredentialFinding
	scanInto(&findings, "system_prompt", []byte(spec.SystemPrompt), allow)
	scanInto(&findings, "command", []byte(strings.Join(spec.Command, " ")), allow)
	scanInto(&findings, "description", []byte(spec.Description), allow)
	if len(findings) > 0 {
		return nil, &CredentialError{Findings: findings}
	}
	pins, err := w.pinCapabilities(ctx, spec.Capabilities, local)
	if err != nil {
		return nil, fmt.Errorf("subagent %q: %w", name, err)
	}
	if err := w.checkOverlayClash(ctx, pins, local); err != nil {
		return nil, fmt.Errorf("subagent %q: %w", name, err)
	}
	doc := catalog.SubagentDoc{
		Description: spec.Description, Runtime: spec.Runtime, Model: spec.Model,
		SystemPrompt: spec.SystemPrompt, Command: spec.Command, Capabilities: pins, Budget: spec.Budget,
	}
	data, err := doc.Marshal()
	if err != nil {
		return nil, err
	}
	return &Pending{
		Kind: catalog.KindSubagent, Name: name, Content: data, Digest: digest.Sum(data),
		Meta: catalog.Meta{
			Description: spec.Description, Runtime: spec.Runtime, Model: spec.Model, Capabilities: pins,
			AllowedCredentialPatterns: allow, Budget: budgetOrNil(spec.Budget),
		},
	}, nil
}

// checkOverlayClash refuses capabilities that overlay the same workspace path. A capability
// of the same batch (in local) is not stored yet: its overlay files are the ones
// PrepareCapability kept by digest. Dispatch checks again at accept, where every capability
// is stored.
func (w *Writer) checkOverlayClash(ctx context.Context, pins []catalog.Pin, local map[string]digest.Digest) error {
	names := make([]string, 0, len(pins))
	files := make([][]string, 0, len(pins))
	for _, p := range pins {
		if d, ok := local[p.Name]; ok && d == p.Digest {
			w.overlaysMu.Lock()
			fs, ok := w.overlays[d]
			w.overlaysMu.Unlock()
			if !ok {
				return fmt.Errorf("capability %q@%s of this batch was not prepared by this writer", p.Name, d)
			}
			names, files = append(names, p.Name), append(files, fs)
			continue
		}
		n, f, err := w.reader.Overlays(ctx, []catalog.Pin{p})
		if err != nil {
			return err
		}
		names, files = append(names, n...), append(files, f...)
	}
	return catalog.CheckOverlayClash(names, files)
}

func (w *Writer) pinCapabilities(ctx context.Context, refs []string, local map[string]digest.Digest) ([]catalog.Pin, error) {
	pins := []catalog.Pin{}
	seen := map[string]bool{}
	for _, ref := range refs {
		name, digest, err := catalog.ParseRef(catalog.KindCapability, ref)
		if err != nil {
			return nil, err
		}
		if seen[name] {
			return nil, fmt.Errorf("capability %q listed twice", name)
		}
		seen[name] = true
		// A name declared in the same batch pins its pending digest, named or implied: it is not
		// stored yet, so the reader cannot resolve it.
		if d, ok := local[name]; ok && (digest == "" || digest == d) {
			pins = append(pins, catalog.Pin{Name: name, Digest: d})
			continue
		}
		v, err := w.reader.Resolve(ctx, catalog.KindCapability, ref)
		if err != nil {
			return nil, err
		}
		pins = append(pins, catalog.Pin{Name: v.Name, Digest: v.Digest})
	}
	return pins, nil
}

var envKeyPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`) })

// EnvSpec is an env bundle as a person writes it (flags or a manifest entry).
type EnvSpec struct {
	Values  map[string]string
	Secrets map[string][]byte // key -> value; sealed by PrepareEnvSpec, never stored as is
	// Bindings keep secrets out of the sandbox: key (a key of Secrets) -> the hosts the egress
	// proxy may send the value to. Normalised here (sorted, unique, canonical header names).
	Bindings map[string]catalog.Binding
}

// PrepareEnv is [Writer.PrepareEnvSpec] for a bundle without bindings.
func (w *Writer) PrepareEnv(name string, values map[string]string, secrets map[string][]byte, allow []string) (*Pending, error) {
	return w.PrepareEnvSpec(name, EnvSpec{Values: values, Secrets: secrets}, allow)
}

// PrepareEnvSpec checks an env bundle, scans its plain values for credentials and seals its
// secrets. Secret values are never scanned (they are meant to be secret) and never leave this
// function except sealed. Bindings change the document, so the same bundle bound otherwise is
// a new version, and bound the same way is the same one.
func (w *Writer) PrepareEnvSpec(name string, spec EnvSpec, allow []string) (*Pending, error) {
	values, secrets := spec.Values, spec.Secrets
	if err := catalog.CheckName(catalog.KindEnv, name); err != nil {
		return nil, err
	}
	if err := secret.ValidatePatternNames(allow); err != nil {
		return nil, err
	}
	var problems []string
	if len(values)+len(secrets) > maxEnvKeys {
		problems = append(problems, fmt.Sprintf("more than %d keys", maxEnvKeys))
	}
	checkKey := func(k string) {
		switch {
		case !envKeyPattern().MatchString(k):
			problems = append(problems, fmt.Sprintf("key %q is not a valid environment variable name", k))
		case strings.HasPrefix(k, "AGORA_"):
			problems = append(problems, fmt.Sprintf("key %q: the AGORA_ prefix is reserved for agora itself", k))
		}
	}
	for _, k := range catalog.SortedKeys(values) {
		checkKey(k)
		if len(values[k]) > maxEnvValueSize {
			problems = append(problems, fmt.Sprintf("value %s is over %d bytes", k, maxEnvValueSize))
		}
		if _, dup := secrets[k]; dup {
			problems = append(problems, fmt.Sprintf("key %q is both a value and a secret", k))
		}
	}
	for _, k := range catalog.SortedKeys(secrets) {
		checkKey(k)
		switch v := secrets[k]; {
		case len(v) == 0:
			problems = append(problems, fmt.Sprintf("secret %s is empty", k))
		case len(v) > maxSecretSize:
			problems = append(problems, fmt.Sprintf("secret %s is over %d bytes", k, maxSecretSize))
		}
	}
	var bindings map[string]catalog.Binding
	if len(spec.Bindings) > 0 {
		bindings = make(map[string]catalog.Binding, len(spec.Bindings))
		for k, b := range spec.Bindings {
			bindings[k] = catalog.NormalizeBinding(b)
		}
		problems = append(problems, catalog.CheckBindings(bindings, values, secrets)...)
		// The proxy masks a bound value in what hosts send back; a value shorter than the
		// redactor's minimum cannot be masked, so the proxy would refuse it at every dispatch.
		// Say so now, to the person registering it, not to an agent later.
		for _, k := range catalog.SortedKeys(bindings) {
			if v, ok := secrets[k]; ok && len(v) > 0 && len(v) < redact.MinLen {
				problems = append(problems, fmt.Sprintf("binding %s: the secret is shorter than %d bytes, too short to mask in what a host sends back; bind a real credential", k, redact.MinLen))
			}
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("env bundle %q: %s", name, strings.Join(problems, "; "))
	}
	var findings []CredentialFinding
	for _, k := range catalog.SortedKeys(values) {
		scanInto(&findings, "value "+k, []byte(values[k]), allow)
	}
	if len(findings) > 0 {
		return nil, &CredentialError{Findings: findings}
	}
	doc := catalog.EnvDoc{Values: values, Secrets: map[string]string{}, Bindings: bindings}
	var sealed []sealedSecret
	for _, k := range catalog.SortedKeys(secrets) {
		ref := w.sealer.Ref(name, k, secrets[k])
		s, err := w.sealer.Seal(ref, secrets[k])
		if err != nil {
			return nil, fmt.Errorf("env bundle %q: seal secret %s: %w", name, k, err)
		}
		doc.Secrets[k] = ref
		sealed = append(sealed, sealedSecret{ref: ref, sealed: s})
	}
	data, err := doc.Marshal()
	if err != nil {
		return nil, err
	}
	return &Pending{
		Kind: catalog.KindEnv, Name: name, Content: data, Digest: digest.Sum(data), secrets: sealed,
		Meta: catalog.Meta{
			ValueKeys: catalog.SortedKeys(values), SecretKeys: catalog.SortedKeys(secrets), Bindings: bindings,
			AllowedCredentialPatterns: allow,
		},
	}, nil
}

// Assign makes a new version of subagent name with its capabilities replaced by refs; the rest
// of the subagent is unchanged.
func (w *Writer) Assign(ctx context.Context, actor, name string, refs []string) (Change, catalog.Version, error) {
	cur, err := w.reader.Resolve(ctx, catalog.KindSubagent, name)
	if err != nil {
		return Change{}, catalog.Version{}, err
	}
	content, err := w.reader.Content(cur)
	if err != nil {
		return Change{}, catalog.Version{}, err
	}
	doc, err := catalog.ParseSubagentDoc(content)
	if err != nil {
		return Change{}, catalog.Version{}, err
	}
	spec := SubagentSpec{
		Description: doc.Description, SystemPrompt: doc.SystemPrompt, Runtime: doc.Runtime,
		Model: doc.Model, Command: doc.Command, Capabilities: refs,
	}
	p, err := w.PrepareSubagent(ctx, name, spec, nil, cur.Meta.AllowedCredentialPatterns)
	if err != nil {
		return Change{}, catalog.Version{}, err
	}
	return w.Register(ctx, actor, "assign", p)
}

// WorkspaceSpec is a workspace as a person writes it (flags or a manifest entry).
type WorkspaceSpec struct {
	Repo            string   // a git repository on this host; made absolute and clean
	Revisions       []string // ref name patterns (path.Match: '*' does not cross '/')
	DefaultRevision string   // "" means the first pattern without a wildcard
	Description     string
}

// PrepareWorkspace checks a workspace: its repository is a git repository of its own on this
// host, its patterns are valid and its default revision is one they allow. The repository path
// is stored in the content only; the version's metadata (what lists and MCP see) never has it.
func (w *Writer) PrepareWorkspace(ctx context.Context, name string, spec WorkspaceSpec) (*Pending, error) {
	if err := catalog.CheckName(catalog.KindWorkspace, name); err != nil {
		return nil, err
	}
	repo := spec.Repo
	if repo == "" {
		return nil, fmt.Errorf("workspace %q: a repository is required (--repo PATH)", name)
	}
	repo, err := filepath.Abs(repo)
	if err != nil {
		return nil, fmt.Errorf("workspace %q: %w", name, err)
	}
	doc := catalog.WorkspaceDoc{Repo: repo, Revisions: spec.Revisions, DefaultRevision: spec.DefaultRevision, Description: spec.Description}
	if err := doc.Check(); err != nil {
		return nil, fmt.Errorf("workspace %q: %w", name, err)
	}
	if err := workspace.CheckRepo(ctx, repo); err != nil {
		return nil, fmt.Errorf("workspace %q: %w", name, err)
	}
	var findings []CredentialFinding
	scanInto(&findings, "description", []byte(spec.Description), nil)
	if len(findings) > 0 {
		return nil, &CredentialError{Findings: findings}
	}
	data, err := doc.Marshal()
	if err != nil {
		return nil, err
	}
	return &Pending{Kind: catalog.KindWorkspace, Name: name, Content: data, Digest: digest.Sum(data), Meta: doc.Meta()}, nil
}

// budgetOrNil is b, or nil when b limits nothing.
func budgetOrNil(b budget.Budget) *budget.Budget {
	if b.IsZero() {
		return nil
	}
	return &b
}
