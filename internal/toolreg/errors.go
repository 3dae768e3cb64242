package toolreg

import (
	"errors"
	"strconv"
)

// ErrToolNotPermitted is matched (with [errors.Is]) by every [*ToolNotPermitted].
var ErrToolNotPermitted = errors.New("tool not permitted")

// ToolNotPermitted is returned by [View.Call] for a tool outside the view: not granted to the
// role, granted but not registered, or unknown. The reason is in the audit record, not here,
// so the error does not tell a model which tools exist beyond its view.
type ToolNotPermitted struct {
	Role string // "subagent@sha256:…"
	Tool string // the name asked for, cut to [MaxToolNameLen] bytes
}

func (e *ToolNotPermitted) Error() string {
	return "tool " + strconv.Quote(e.Tool) + " is not permitted for role " + strconv.Quote(e.Role)
}

// Is makes errors.Is(err, ErrToolNotPermitted) true.
func (e *ToolNotPermitted) Is(target error) bool { return target == ErrToolNotPermitted }

// NeedsInput is returned by a tool (ask_human) that cannot go on without a person. A runtime
// that finds it with [errors.As] ends the dispatch in needs_input and shows Question. The view
// audits it as an allowed call.
type NeedsInput struct {
	Question string
}

// Error does not repeat the question: it is a raw tool argument.
func (e *NeedsInput) Error() string { return "dispatch needs input from a person" }

// DeniedError is returned by a handler that refuses a call by policy: a command no pattern
// grants, a host outside the egress grant, a path outside the workspace. The view audits it
// as decision "denied" with Reason, and returns it to the caller as is.
type DeniedError struct {
	Tool   string
	Reason string // short and fixed, e.g. "command not granted"; recorded in the audit
	Hint   string // optional, for the model: what would be allowed instead
}

func (e *DeniedError) Error() string {
	s := e.Tool + ": refused: " + e.Reason
	if e.Hint != "" {
		s += "; " + e.Hint
	}
	return s
}

// ArgsError is returned by [View.Call] when the arguments do not satisfy the tool's schema;
// the handler did not run. Reason names the property and the rule, never the value.
type ArgsError struct {
	Tool   string
	Reason string
}

func (e *ArgsError) Error() string {
	return "invalid arguments for tool " + strconv.Quote(e.Tool) + ": " + e.Reason
}
