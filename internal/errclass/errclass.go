// Package errclass is a leaf: the classes of failure a caller acts on differently (a name that
// names nothing, input that failed validation), carried by the error itself so the CLI derives
// its exit code from the type, never from the text, and the one wording of "not found" that
// the CLI and the MCP server share.
package errclass

import (
	"errors"
	"fmt"
	"strings"
)

// Class is what kind of failure an error is. The CLI maps each to one exit code
// (internal/cli/cmdutil/exitcode.go, the table in README.md).
type Class int

const (
	// Failure is everything else: agora or what it runs on failed (the default).
	Failure Class = iota
	// NotFound: a name or id the caller gave names nothing (dispatch, run, task, subagent,
	// capability, env, workspace, target, schedule).
	NotFound
	// Invalid: input the caller handed over (a manifest, a plan, a capability) is malformed
	// or failed validation; nothing was done.
	Invalid
)

// Classed is an error that knows its class.
type Classed interface {
	error
	Class() Class
}

// Of returns the class of the first error in err's chain that carries one, else Failure.
func Of(err error) Class {
	var c Classed
	if errors.As(err, &c) {
		return c.Class()
	}
	return Failure
}

// NotFoundError is a name or id that names nothing. Its text is the one form agora uses
// everywhere: `KIND "ID" not found`, then " in IN" when the name is looked up inside
// something, "; known: a, b" when the known names are given, and " (NOTE)".
type NotFoundError struct {
	Kind  string   // dispatch, run, task, subagent, capability, env, workspace, target, schedule
	ID    string   // what the caller asked for, quoted in the message
	In    string   // what it was looked up in (run R for a task); "" for the whole home
	Known []string // the names that do exist, when the list is short enough to help
	Note  string   // where the names come from, when that helps (targets are set in agora.yaml)
	// Of is the package's own sentinel (dispatch.ErrNotFound ...), so errors.Is keeps working.
	Of error
}

// maxKnown caps how many known names a message lists.
const maxKnown = 10

func (e *NotFoundError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %q not found", e.Kind, e.ID)
	if e.In != "" {
		b.WriteString(" in " + e.In)
	}
	switch {
	case len(e.Known) > maxKnown:
		fmt.Fprintf(&b, "; known: %s, and %d more", strings.Join(e.Known[:maxKnown], ", "), len(e.Known)-maxKnown)
	case len(e.Known) > 0:
		b.WriteString("; known: " + strings.Join(e.Known, ", "))
	}
	if e.Note != "" {
		b.WriteString(" (" + e.Note + ")")
	}
	return b.String()
}

func (e *NotFoundError) Unwrap() error { return e.Of }

// Class is NotFound.
func (e *NotFoundError) Class() Class { return NotFound }

// NotFoundf is a [NotFoundError] for kind and id, wrapping the package's sentinel of.
func NotFoundf(of error, kind, id string, known ...string) error {
	return &NotFoundError{Kind: kind, ID: id, Known: known, Of: of}
}

// invalidError marks err as invalid input, keeping its text.
type invalidError struct{ err error }

func (e *invalidError) Error() string { return e.err.Error() }
func (e *invalidError) Unwrap() error { return e.err }
func (e *invalidError) Class() Class  { return Invalid }

// AsInvalid marks err (nil stays nil) as input that failed validation.
func AsInvalid(err error) error {
	if err == nil {
		return nil
	}
	return &invalidError{err: err}
}
