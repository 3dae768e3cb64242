package agentproc

import (
	"errors"
	"fmt"
	"strings"
)

// ErrTimedOut means the CLI ran past its time budget and its process group was killed.
var ErrTimedOut = errors.New("the agent CLI ran past its time budget")

// NotFoundError means the CLI's executable is not on the PATH of the run's environment (or
// not at the path given).
type NotFoundError struct {
	Runtime string // the runtime reporting it: "claude-code", "codex"
	Name    string // the executable asked for: the configured binary, or the CLI's name
	PATH    string // the PATH searched
	Err     error
}

func (e *NotFoundError) Error() string {
	if strings.Contains(e.Name, "/") {
		return fmt.Sprintf("%s runtime: %q not found: %v", e.Runtime, e.Name, e.Err)
	}
	return fmt.Sprintf("%s runtime: %q not found on PATH (PATH=%s)", e.Runtime, e.Name, e.PATH)
}

func (e *NotFoundError) Unwrap() error { return e.Err }

// ExitError means the CLI exited with a non-zero status (or was killed by a signal), or said
// its work failed.
type ExitError struct {
	Runtime  string // "claude-code", "codex"
	CLI      string // the CLI's name as people know it: "claude", "codex"
	ExitCode int    // -1 when killed by a signal
	// Subtype is the CLI's own word for how it ended (claude's result subtype), "" when it
	// gave none.
	Subtype string
	// Detail is the CLI's first or last error message or else the tail of its stderr, on
	// one line, at most [MaxDetail] bytes; the CLI's words, so the caller redacts it.
	Detail string
}

func (e *ExitError) Error() string {
	msg := fmt.Sprintf("%s runtime: %s exited with code %d", e.Runtime, e.CLI, e.ExitCode)
	if e.Subtype != "" {
		msg += fmt.Sprintf(" (result %s)", e.Subtype)
	}
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// MaxDetail bounds [ExitError.Detail].
const MaxDetail = 512
