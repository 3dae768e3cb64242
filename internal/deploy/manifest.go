// Package deploy reads agora-manifest.yaml, the declarative form of the catalog, and turns it
// into a plan of catalog changes (create, new version, unchanged, retire) that is applied in one
// transaction, all or nothing.
//
// deploy is deploy-time and host side: only the CLI's apply imports it. Secrets appear in a
// manifest only as sources (from_env, from_file), never as values.
package deploy

import (
	"fmt"
	"reflect"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/agora-dev/agora/internal/budget"
	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/catalog/ccimport"
	"github.com/agora-dev/agora/internal/strictyaml"
)

// MaxSize caps a manifest file.
const MaxSize = 4 << 20

// Manifest is agora-manifest.yaml.
type Manifest struct {
	Version      int          `yaml:"version"`
	Capabilities []Capability `yaml:"capabilities"`
	Subagents    []Subagent   `yaml:"subagents"`
	Envs         []Env        `yaml:"envs"`
	Workspaces   []Workspace  `yaml:"workspaces"`
	// Import names Claude Code subagent files to import as claude-code subagents, as
	// 'agora subagent import' does (package ccimport).
	Import []Import `yaml:"import"`
}

// Import imports the Claude Code subagent files of a .claude/agents directory, or one .md
// file, relative to the manifest. Written as the path alone or as a mapping.
type Import struct {
	From string `yaml:"from"`
	// DefaultTools are the tools, as a subagent file writes them, of a file that lists none
	// (refused without them: Claude Code gives such a subagent every tool).
	DefaultTools            string   `yaml:"default_tools"`
	AllowCredentialPatterns []string `yaml:"allow_credential_patterns"`
}

// UnmarshalStrictYAML decodes a path or a {from, default_tools, allow_credential_patterns}
// mapping.
func (im *Import) UnmarshalStrictYAML(d *strictyaml.Decoder, n *yaml.Node, path string) {
	if n.Kind == yaml.ScalarNode && n.Tag != "!!null" {
		im.From = n.Value
		return
	}
	if n.Kind != yaml.MappingNode {
		d.Errorf(n, path, "want a directory of Claude Code subagent files, or {from: DIR, default_tools: TOOLS}")
		return
	}
	var m struct {
		From                    string   `yaml:"from"`
		DefaultTools            string   `yaml:"default_tools"`
		AllowCredentialPatterns []string `yaml:"allow_credential_patterns"`
	}
	d.Decode(n, reflect.ValueOf(&m).Elem(), path)
	*im = Import(m)
}

// Workspace declares a workspace: a git repository on this host (absolute, or relative to
// the manifest) and the revision patterns dispatches and plans may ask for.
type Workspace struct {
	Name            string   `yaml:"name"`
	Repo            string   `yaml:"repo"`
	Revisions       []string `yaml:"revisions"`
	DefaultRevision string   `yaml:"default_revision"`
	Description     string   `yaml:"description"`
}

// Capability declares a capability from a directory relative to the manifest.
type Capability struct {
	Name                    string   `yaml:"name"`
	From                    string   `yaml:"from"`
	AllowCredentialPatterns []string `yaml:"allow_credential_patterns"`
}

// Subagent declares a subagent inline, or from a subagent YAML file relative to the manifest.
type Subagent struct {
	Name                    string   `yaml:"name"`
	From                    string   `yaml:"from"`
	Description             string   `yaml:"description"`
	SystemPrompt            string   `yaml:"system_prompt"`
	PromptFile              string   `yaml:"prompt_file"`
	Runtime                 string   `yaml:"runtime"`
	Model                   string   `yaml:"model"`
	Command                 []string `yaml:"command"`
	Capabilities            []string `yaml:"capabilities"`
	AllowCredentialPatterns []string `yaml:"allow_credential_patterns"`
	// Budget is the most a dispatch of the subagent may spend (tokens, usd, model_calls).
	Budget budget.Budget `yaml:"budget"`
}

// Env declares an env bundle.
type Env struct {
	Name    string                  `yaml:"name"`
	Values  map[string]string       `yaml:"values"`
	Secrets map[string]SecretSource `yaml:"secrets"`
	// Bind keeps secrets out of the sandbox: a key of Secrets -> the hosts the egress proxy
	// may send its value to (the sandbox sees only a placeholder).
	Bind                    map[string]Binding `yaml:"bind"`
	AllowCredentialPatterns []string           `yaml:"allow_credential_patterns"`
}

// Binding binds one secret of an env bundle ([catalog.Binding]): the hosts its value may be
// sent to and the headers besides Authorization it is swapped into.
type Binding struct {
	Hosts   []string `yaml:"hosts"`
	Headers []string `yaml:"headers"`
}

// SecretSource says where a secret's value is read from at apply time.
type SecretSource struct {
	FromEnv  string `yaml:"from_env"`
	FromFile string `yaml:"from_file"`
}

// Parse decodes and checks a manifest. Every problem is reported at once with file, line and
// path. pos lets later steps point at the source too.
func Parse(file string, src []byte) (*Manifest, *strictyaml.Positions, error) {
	m, pos, errs, err := parse(file, src)
	if err != nil {
		return nil, pos, err
	}
	if len(errs) > 0 {
		return nil, pos, errs
	}
	return m, pos, nil
}

// parse is Parse that returns what decoded along with its problems (sorted), so the entries
// without one can still be checked against the catalog; err is a problem that left nothing.
func parse(file string, src []byte) (*Manifest, *strictyaml.Positions, strictyaml.Errors, error) {
	if len(src) > MaxSize {
		return nil, nil, nil, fmt.Errorf("%s is larger than %d bytes", file, MaxSize)
	}
	var m Manifest
	pos, err := strictyaml.Decode(file, src, &m)
	// Keep checking what did decode, so every problem is reported at once.
	errs, ok := strictyaml.Collect(err)
	if !ok {
		return nil, pos, nil, err
	}
	if m.Version != 1 {
		errs = append(errs, pos.Errorf("version", "want version: 1, got %d", m.Version))
	}
	check := func(kind catalog.Kind, path, name string, seen map[string]string) {
		if err := catalog.CheckName(kind, name); err != nil {
			errs = append(errs, pos.Errorf(path+".name", "%v", err))
			return
		}
		if first, dup := seen[name]; dup {
			errs = append(errs, pos.Errorf(path+".name", "%s %q is declared twice (first at %s)", kind, name, first))
		}
		seen[name] = path
	}
	seen := map[string]string{}
	for i, c := range m.Capabilities {
		p := fmt.Sprintf("capabilities[%d]", i)
		check(catalog.KindCapability, p, c.Name, seen)
		if c.From == "" {
			errs = append(errs, pos.Errorf(p, "from (the capability's directory) is required"))
		}
	}
	seen = map[string]string{}
	for i, s := range m.Subagents {
		p := fmt.Sprintf("subagents[%d]", i)
		check(catalog.KindSubagent, p, s.Name, seen)
		if s.From != "" && (s.Description != "" || s.SystemPrompt != "" || s.PromptFile != "" || s.Runtime != "" ||
			s.Model != "" || s.Command != nil || s.Capabilities != nil) {
			errs = append(errs, pos.Errorf(p+".from", "from names a subagent file; declare the other fields there, not here"))
		}
		if s.SystemPrompt != "" && s.PromptFile != "" {
			errs = append(errs, pos.Errorf(p+".prompt_file", "system_prompt and prompt_file cannot both be set"))
		}
	}
	seen = map[string]string{}
	for i, e := range m.Envs {
		p := fmt.Sprintf("envs[%d]", i)
		check(catalog.KindEnv, p, e.Name, seen)
		for _, k := range catalog.SortedKeys(e.Secrets) {
			s := e.Secrets[k]
			if (s.FromEnv == "") == (s.FromFile == "") {
				errs = append(errs, pos.Errorf(p+".secrets."+k, "want exactly one of from_env or from_file"))
			}
		}
		errs = append(errs, checkBind(pos, p, e)...)
	}
	for i, im := range m.Import {
		p := fmt.Sprintf("import[%d]", i)
		if im.From == "" {
			errs = append(errs, pos.Errorf(p, "from (a .claude/agents directory or a .md file) is required"))
		}
		if im.DefaultTools != "" {
			if _, err := ccimport.ParseDefaultTools(im.DefaultTools); err != nil {
				errs = append(errs, pos.Errorf(p+".default_tools", "%v", err))
			}
		}
	}
	seen = map[string]string{}
	for i, w := range m.Workspaces {
		p := fmt.Sprintf("workspaces[%d]", i)
		check(catalog.KindWorkspace, p, w.Name, seen)
		if w.Repo == "" {
			errs = append(errs, pos.Errorf(p, "repo (the git repository) is required"))
		}
		if len(w.Revisions) == 0 {
			errs = append(errs, pos.Errorf(p, "revisions (at least one pattern, such as main) is required"))
		}
		for j, r := range w.Revisions {
			if err := catalog.CheckRevisionPattern(r); err != nil {
				errs = append(errs, pos.Errorf(fmt.Sprintf("%s.revisions[%d]", p, j), "%v", err))
			}
		}
	}
	errs.Sort()
	return &m, pos, errs, nil
}

// checkBind checks an env entry's bind: each key a secret the entry declares, with at least
// one valid host and valid headers, every problem at its own path.
func checkBind(pos *strictyaml.Positions, path string, e Env) strictyaml.Errors {
	var errs strictyaml.Errors
	for _, k := range catalog.SortedKeys(e.Bind) {
		p, b := path+".bind."+k, e.Bind[k]
		if _, ok := e.Secrets[k]; !ok {
			if _, isValue := e.Values[k]; isValue {
				errs = append(errs, pos.Errorf(p, "%s is a plain value (values:), not a secret; only a secret can be bound to hosts", k))
			} else {
				errs = append(errs, pos.Errorf(p, "%s is not a secret of this env bundle (secrets: %s); declare it under secrets: first", k, keyList(catalog.SortedKeys(e.Secrets))))
			}
		}
		if len(b.Hosts) == 0 {
			errs = append(errs, pos.Errorf(p, "hosts (at least one host the secret may be sent to) is required"))
		}
		for j, h := range b.Hosts {
			if err := catalog.CheckBindingHost(h); err != nil {
				errs = append(errs, pos.Errorf(fmt.Sprintf("%s.hosts[%d]", p, j), "%v", err))
			}
		}
		for j, h := range b.Headers {
			if err := catalog.CheckBindingHeader(catalog.CanonicalHeader(h)); err != nil {
				errs = append(errs, pos.Errorf(fmt.Sprintf("%s.headers[%d]", p, j), "%v", err))
			}
		}
	}
	return errs
}

func keyList(keys []string) string {
	if len(keys) == 0 {
		return "none"
	}
	return strings.Join(keys, ", ")
}
