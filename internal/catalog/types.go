// Package catalog defines agora's catalog nouns (capabilities, subagents, env bundles,
// workspaces) and their stored formats: the deterministic capability archive, capability.yaml
// (whose grant is a grant.Set) and the canonical subagent, env and workspace documents. It is
// pure: no database, no keys, no I/O beyond reading a directory, so both the host and the
// worker inside a sandbox use it.
// Package registry reads versions from agora.db; package provision writes them.
package catalog

import (
	"fmt"
	"github.com/agora-dev/agora/internal/budget"
	"sort"
	"strings"
	"time"

	"github.com/agora-dev/agora/internal/digest"
)

// Kind is one of the four catalog nouns.
type Kind string

const (
	KindCapability Kind = "capability"
	KindSubagent   Kind = "subagent"
	KindEnv        Kind = "env"
	// KindWorkspace is a repository on the host that dispatches and plans may name, with the
	// revisions they may ask for ([WorkspaceDoc]). People provision it; an AI only names it.
	KindWorkspace Kind = "workspace"
)

// Kinds lists every kind, in the order a manifest applies them.
var Kinds = []Kind{KindCapability, KindSubagent, KindEnv, KindWorkspace}

// Plural is the noun's plural, for messages.
func (k Kind) Plural() string {
	switch k {
	case KindEnv:
		return "env bundles"
	case KindCapability:
		return "capabilities"
	}
	return string(k) + "s"
}

func (k Kind) String() string {
	if k == KindEnv {
		return "env bundle"
	}
	return string(k)
}

// Version is one immutable version of a catalog entry, with the metadata kept beside it so
// lists never read content.
type Version struct {
	Kind         Kind          `json:"kind"`
	Name         string        `json:"name"`
	Digest       digest.Digest `json:"digest"`
	Size         int64         `json:"size"`
	RegisteredAt time.Time     `json:"registered_at"` // when this content was first registered under this name
	RegisteredBy string        `json:"registered_by"`
	Meta         Meta          `json:"meta"`
}

// Ref is "name" or "name@sha256:HEX".
func (v Version) Ref() string { return v.Name + "@" + string(v.Digest) }

// Meta is what lists and shows need without reading content. Fields apply per kind.
type Meta struct {
	Description string `json:"description,omitempty"`

	// Capability. CapabilityDoc is its capability.yaml; the stored key stays "grants" (stored
	// metadata is read back by older and newer agora alike).
	CapabilityDoc *CapabilityDoc `json:"grants,omitempty"`
	FileCount     int            `json:"file_count,omitempty"`

	// Subagent.
	Runtime      string `json:"runtime,omitempty"`
	Model        string `json:"model,omitempty"`
	Capabilities []Pin  `json:"capabilities,omitempty"`
	// Budget is the subagent's budget, nil when it sets none.
	Budget *budget.Budget `json:"budget,omitempty"`

	// Env bundle: keys only, never values of secrets.
	ValueKeys  []string `json:"value_keys,omitempty"`
	SecretKeys []string `json:"secret_keys,omitempty"`
	// Bindings are the bound secrets' hosts and headers (never a value), so lists, shows and
	// apply plans see where a secret may be sent without reading content.
	Bindings map[string]Binding `json:"bindings,omitempty"`

	// Workspace: the revision patterns and the default, never the repository path.
	Revisions       []string `json:"revisions,omitempty"`
	DefaultRevision string   `json:"default_revision,omitempty"`

	// AllowedCredentialPatterns records scanner opt-outs used when this content was registered.
	AllowedCredentialPatterns []string `json:"allowed_credential_patterns,omitempty"`
}

// Pin names a capability version a subagent was registered with.
type Pin struct {
	Name   string        `json:"name"`
	Digest digest.Digest `json:"digest"`
}

// Event is one line of a name's history.
type Event struct {
	Seq    int64         `json:"seq"`
	Action string        `json:"action"` // create, update, retire
	Digest digest.Digest `json:"digest,omitempty"`
	At     time.Time     `json:"at"`
	Actor  string        `json:"actor"`
}

// Actions recorded in history and shown in apply plans.
const (
	ActionCreate    = "create"
	ActionUpdate    = "update"
	ActionUnchanged = "unchanged"
	ActionRetire    = "retire"
)

// CheckName reports whether name is a valid catalog name: 1-64 lowercase letters, digits,
// '.', '_' or '-', starting and ending with a letter or digit.
func CheckName(kind Kind, name string) error {
	if !validName(name) {
		return fmt.Errorf("invalid %s name %q: use 1-64 lowercase letters, digits, '.', '_' or '-', starting and ending with a letter or digit", kind, name)
	}
	return nil
}

// validName is the name rule as bytes, `^[a-z0-9]([a-z0-9._-]{0,62}[a-z0-9])?$`
// (TestValidName_AsTheRegexp): compiling that regexp cost every worker 0.3 ms of its start.
func validName(name string) bool {
	n := len(name)
	if n == 0 || n > 64 || !alnum(name[0]) || !alnum(name[n-1]) {
		return false
	}
	for i := 1; i < n-1; i++ {
		if c := name[i]; !alnum(c) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// alnum reports whether c is a lowercase ASCII letter or a digit.
func alnum(c byte) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }

// ParseRef splits "name" or "name@sha256:HEX".
func ParseRef(kind Kind, ref string) (name string, pin digest.Digest, err error) {
	name, d, pinned := strings.Cut(ref, "@")
	if err := CheckName(kind, name); err != nil {
		return "", "", err
	}
	if !pinned {
		return name, "", nil
	}
	pin, err = digest.Parse(d)
	if err != nil {
		return "", "", fmt.Errorf("%s reference %q: %w", kind, ref, err)
	}
	return name, pin, nil
}

// SortedKeys returns the keys of m in order.
func SortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
