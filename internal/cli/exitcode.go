package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// Exit codes. They are a closed set: scripts and orchestrators branch on them.
const (
	ExitOK          = 0 // the command did what was asked
	ExitError       = 1 // agora or its infrastructure failed (database, sandbox, provider)
	ExitUsage       = 2 // the command line was wrong; nothing was done
	ExitWorkerFail  = 3 // a dispatched worker ran and failed (non-zero exit, timeout, denied)
	ExitNeedsInput  = 4 // a dispatch ended waiting for an answer (agora dispatch resume)
	ExitCheckFailed = 5 // a verification found a failed check (agora verify)
	// ExitInterrupted is 128+SIGINT, as a shell reports a command Ctrl-C stopped: the
	// message says what became of the work.
	ExitInterrupted = 130
)

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
