package cmdutil

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
// never picks a code by matching an error's text: [ExitCode] derives it from the error's type
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

// ExitRow is one row of the exit-code table: a code, its class's name and what it means.
type ExitRow struct {
	Code    int
	Class   string
	Meaning string
}

// ExitTable is the exit-code table, in one place: 'agora --help' prints it and README.md's
// "Exit codes" table is tested to be the same (TestExitCodes_Table).
func ExitTable() []ExitRow {
	return []ExitRow{
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

// ExitCodesHelp is the table as 'agora --help' ends it.
func ExitCodesHelp() string {
	var b strings.Builder
	b.WriteString("Exit codes:\n")
	for _, r := range ExitTable() {
		fmt.Fprintf(&b, "  %3d  %s: %s\n", r.Code, r.Class, r.Meaning)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// ExitCode is the code err ends the process with, from its type alone: a class carried by the
// error (a name that names nothing, input that failed validation) wins over the usage error a
// command wraps a refused request in, so an unknown subagent is "not found" wherever the
// lookup happened.
func ExitCode(err error) int {
	var (
		ee *ExitCodeError
		ue *UsageError
		me *home.MissingError
		ye strictyaml.Errors
	)
	switch {
	case errors.As(err, &ee):
		return ee.Code
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

// InterruptedError is a command stopped by Ctrl-C (or SIGTERM), saying what happened to the
// work it had started.
type InterruptedError struct{ What string }

func (e *InterruptedError) Error() string { return e.What }

// Interrupted is an [InterruptedError] saying, as format and args put it, what became of the
// work.
func Interrupted(format string, args ...any) error {
	return &InterruptedError{What: fmt.Sprintf(format, args...)}
}

// ExitCodeError carries a specific exit code up to internal/cli's Run with the error to print (nil prints
// nothing more: the command already said what happened).
type ExitCodeError struct {
	Code int
	Err  error
}

func (e *ExitCodeError) Error() string {
	if e.Err == nil {
		return ""
	}
	return e.Err.Error()
}

func (e *ExitCodeError) Unwrap() error { return e.Err }

// UsageError marks a wrong command line.
type UsageError struct {
	Err error
	Cmd *cobra.Command
}

// CmdPath is the path of the command the usage error is about, without "agora".
func (e *UsageError) CmdPath() string {
	if e.Cmd == nil {
		return ""
	}
	return strings.TrimSpace(strings.TrimPrefix(e.Cmd.CommandPath(), "agora"))
}

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// UsageErrorf is a [UsageError] about cmd with the message format and args make.
func UsageErrorf(cmd *cobra.Command, format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...), Cmd: cmd}
}
