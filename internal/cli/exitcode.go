package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/errclass"
	"github.com/agora-dev/agora/internal/home"
)

// Exit codes: the one table (README.md "Exit codes" prints it; TestExitCodes_Table keeps the
// two the same). They are a closed set: scripts and orchestrators branch on them. A command
// never picks a code by matching an error's text: [exitCode] derives it from the error's type
// (errclass carries the classes domain packages raise).
const (
	ExitOK          = 0 // the command did what was asked
	ExitError       = 1 // agora or its infrastructure failed (database, sandbox, provider, orchestrator down)
	ExitUsage       = 2 // the command line or its AGORA_HOME was wrong; nothing was done
	ExitWorkerFail  = 3 // a dispatched worker ran and failed (non-zero exit, timeout, denied)
	ExitNeedsInput  = 4 // a dispatch or run ended waiting for an answer (agora dispatch resume, agora orch answer)
	ExitCheckFailed = 5 // a verification found a failed check (agora verify)
	ExitNotFound    = 6 // a name or id given names nothing: KIND "ID" not found
	ExitInvalid     = 7 // a file or request the command read is malformed or failed validation (manifest, plan, capability)
	// ExitInterrupted is 128+SIGINT, as a shell reports a command Ctrl-C stopped: the
	// message says what became of the work.
	ExitInterrupted = 130
)

// exitCode is the code err ends the process with, from its type alone.
func exitCode(err error) int {
	var (
		ee *exitError
		ue *usageError
		me *home.MissingError
	)
	switch {
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &ue), errors.As(err, &me):
		return ExitUsage
	}
	switch errclass.Of(err) {
	case errclass.NotFound:
		return ExitNotFound
	case errclass.Invalid:
		return ExitInvalid
	}
	return ExitError
}

// interruptedError is a command stopped by Ctrl-C (or SIGTERM), saying what happened to the
// work it had started.
type interruptedError struct{ what string }

func (e *interruptedError) Error() string { return e.what }

func interrupted(format string, args ...any) error {
	return &interruptedError{what: fmt.Sprintf(format, args...)}
}

// exitError carries a specific exit code up to [Main] with the error to print (nil prints
// nothing more: the command already said what happened).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return ""
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// usageError marks a wrong command line.
type usageError struct {
	err error
	cmd *cobra.Command
}

func (e *usageError) cmdPath() string {
	if e.cmd == nil {
		return ""
	}
	return strings.TrimSpace(strings.TrimPrefix(e.cmd.CommandPath(), "agora"))
}

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usageErrorf(cmd *cobra.Command, format string, args ...any) error {
	return &usageError{err: errorf(format, args...), cmd: cmd}
}
