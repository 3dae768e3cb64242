package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/errclass"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/strictyaml"
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

// exitRow is one row of the exit-code table: a code, its class's name and what it means.
type exitRow struct {
	Code    int
	Class   string
	Meaning string
}

// exitTable is the exit-code table, in one place: 'agora --help' prints it and README.md's
// "Exit codes" table is tested to be the same (TestExitCodes_Table).
func exitTable() []exitRow {
	return []exitRow{
		{ExitOK, "ok", "the command did what was asked"},
		{ExitError, "error", "agora or its infrastructure failed (database, sandbox, provider, the orchestrator not running)"},
		{ExitUsage, "usage", "the command line, or its AGORA_HOME, was wrong (a missing home, a request refused before anything was recorded); nothing was done"},
		{ExitWorkerFail, "worker failed", "a dispatched worker or a run's task ran and did not succeed (non-zero exit, timeout, denied)"},
		{ExitNeedsInput, "needs input", "a dispatch or a run is waiting for an answer (agora dispatch resume, agora orch answer)"},
		{ExitCheckFailed, "check failed", "a verification found a failed check (agora verify)"},
		{ExitNotFound, "not found", `a name or id given names nothing: KIND "ID" not found (dispatch, run, task, subagent, capability, env bundle, workspace, target, schedule)`},
		{ExitInvalid, "invalid input", "a file or request the command was given is missing, malformed or failed validation (a manifest, a plan, a capability, a cron spec, a name in use); nothing was done"},
		{ExitInterrupted, "interrupted", "Ctrl-C or SIGTERM; the message says what became of the work (cancelled and recorded, still running, or nothing changed)"},
	}
}

// exitCodesHelp is the table as 'agora --help' ends it.
func exitCodesHelp() string {
	var b strings.Builder
	b.WriteString("Exit codes:\n")
	for _, r := range exitTable() {
		fmt.Fprintf(&b, "  %3d  %s: %s\n", r.Code, r.Class, r.Meaning)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// exitCode is the code err ends the process with, from its type alone: a class carried by the
// error (a name that names nothing, input that failed validation) wins over the usage error a
// command wraps a refused request in, so an unknown subagent is "not found" wherever the
// lookup happened.
func exitCode(err error) int {
	var (
		ee *exitError
		ue *usageError
		me *home.MissingError
		ye strictyaml.Errors
	)
	switch {
	case errors.As(err, &ee):
		return ee.code
	case errclass.Of(err) == errclass.Invalid, errors.As(err, &ye):
		// Before not found: a plan naming an unknown subagent is an invalid plan.
		return ExitInvalid
	case errclass.Of(err) == errclass.NotFound:
		return ExitNotFound
	case errors.As(err, &ue), errors.As(err, &me):
		return ExitUsage
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
