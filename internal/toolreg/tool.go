package toolreg

import (
	"context"
	"encoding/json"

	"github.com/agora-dev/agora/internal/grant"
)

// MaxToolNameLen caps a tool name. Names are lowercase ASCII letters, digits and
// underscores, starting with a letter.
const MaxToolNameLen = 64

// MaxArgsSize caps the arguments of one call, in bytes of JSON. It leaves room for the largest
// write_file content (10 MiB) after JSON escaping.
const MaxArgsSize = 32 << 20

// Tool is one registered tool.
type Tool struct {
	// Name is what the model calls; see [MaxToolNameLen] for the syntax.
	Name string
	// Description tells the model what the tool does. It MUST NOT be empty.
	Description string
	// Schema is the JSON Schema of the arguments: a closed object
	// ("additionalProperties": false) in the subset described in schema.go. [View.Call]
	// enforces it before Handler runs.
	Schema json.RawMessage
	// ReadOnly is set when the tool changes nothing (a hint for runtimes and people; the
	// grant, not this flag, decides access).
	ReadOnly bool
	// Handler does the work. It runs only for a granted call whose arguments passed Schema.
	// It returns [*DeniedError] to refuse by policy and [*NeedsInput] to stop for a person.
	// Its errors go back to the model and into the audit record, so they MUST NOT contain
	// raw argument values (paths, URLs, commands) or secrets.
	Handler func(ctx context.Context, c Call) (Result, error)
}

// Call is what a handler receives.
type Call struct {
	// Args passed the tool's schema. The handler MUST NOT modify it.
	Args json.RawMessage
	// Grants is the view's grant. The handler MUST NOT modify it.
	Grants     grant.Set
	DispatchID string
	Role       string
	// Learn: the call runs in a learn view ([WithLearn]) and what Grants would refuse was
	// recorded as would_deny: the handler lets it through. Nothing outside the grant (the
	// workspace's bounds, the sandbox) is relaxed.
	Learn bool
}

// Result is the text returned to the model.
type Result struct {
	Content string
}

// ToolInfo describes a tool in a view.
type ToolInfo struct {
	Name        string
	Description string
	Schema      json.RawMessage
	ReadOnly    bool
}

// validName reports whether name has the tool name syntax.
func validName(name string) bool {
	if name == "" || len(name) > MaxToolNameLen || name[0] < 'a' || name[0] > 'z' {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}
