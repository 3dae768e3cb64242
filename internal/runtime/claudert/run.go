package claudert

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/agora-dev/agora/internal/runtime/clitail"
	"github.com/agora-dev/agora/internal/runtime/execrt"
)

// ErrTimedOut means claude ran past Config.Timeout and its process group was killed.
var ErrTimedOut = errors.New("claude ran past its time budget")

// NotFoundError means the claude executable is not on the PATH of Config.Env (or not at the
// path given).
type NotFoundError struct {
	Name string // Config.Binary, or "claude"
	PATH string // the PATH searched
	Err  error
}

func (e *NotFoundError) Error() string {
	if strings.Contains(e.Name, "/") {
		return fmt.Sprintf("claude-code runtime: %q not found: %v", e.Name, e.Err)
	}
	return fmt.Sprintf("claude-code runtime: %q not found on PATH (PATH=%s)", e.Name, e.PATH)
}

func (e *NotFoundError) Unwrap() error { return e.Err }

// ExitError means claude exited with a non-zero status (or was killed by a signal).
type ExitError struct {
	ExitCode int // -1 when killed by a signal
	// Subtype is the result event's subtype, "" when there was none.
	Subtype string
	// Detail is the result's first error message or else the tail of claude's stderr, on
	// one line, at most 512 bytes; claude's words, so the caller redacts it.
	Detail string
}

func (e *ExitError) Error() string {
	msg := fmt.Sprintf("claude-code runtime: claude exited with code %d", e.ExitCode)
	if e.Subtype != "" {
		msg += fmt.Sprintf(" (result %s)", e.Subtype)
	}
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

const (
	// stderrTail is how much of claude's stderr Run keeps for an [ExitError].
	stderrTail = 4 << 10
	// maxDetail bounds ExitError.Detail.
	maxDetail = 512
	// shell feeds the prompt file to claude's stdin: execrt gives the process no stdin, so
	// /bin/sh opens the file and execs claude in its own place (same pid, same group, argv
	// exactly claude's). It runs no user input: the file and the program are positional
	// parameters.
	shell       = "/bin/sh"
	stdinScript = `f=$1; shift; exec "$@" <"$f"`
)

// Run runs claude once on prompt (given on stdin) and returns what it produced. The
// stream-json output is parsed as it arrives, written to cfg.Transcript and shown to
// cfg.Observer.
//
// Run returns a [*NotFoundError] when claude is not on the PATH of cfg.Env, [ErrTimedOut]
// when cfg.Timeout is spent, ctx's error when ctx is done (both after killing claude's
// process group), an [*ExitError] when claude exits non-zero, and [ErrNoResult] or a parse
// error when claude exits zero without a well-formed result event. The Result holds
// whatever was parsed in every case. Cancelling ctx kills claude and everything it started.
func Run(ctx context.Context, cfg Config, prompt string) (Result, error) {
	name := cfg.Binary
	if name == "" {
		name = "claude"
	}
	path := execrt.EnvValue(cfg.Env, "PATH")
	prog, err := execrt.LookPath(name, path)
	if err != nil {
		return Result{}, &NotFoundError{Name: name, PATH: path, Err: err}
	}
	if cfg.MCPConfig != "" && !filepath.IsAbs(cfg.MCPConfig) {
		return Result{}, fmt.Errorf("claude-code runtime: MCP config %q is not an absolute path", cfg.MCPConfig)
	}
	tmp, err := os.MkdirTemp(cfg.TempDir, "claudert-")
	if err != nil {
		return Result{}, fmt.Errorf("claude-code runtime: create prompt directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	promptFile := filepath.Join(tmp, "prompt")
	if err := os.WriteFile(promptFile, []byte(prompt), 0o600); err != nil {
		return Result{}, fmt.Errorf("claude-code runtime: write prompt: %w", err)
	}
	systemFile := ""
	if cfg.SystemPrompt != "" {
		systemFile = filepath.Join(tmp, "system-prompt")
		if err := os.WriteFile(systemFile, []byte(cfg.SystemPrompt), 0o600); err != nil {
			return Result{}, fmt.Errorf("claude-code runtime: write system prompt: %w", err)
		}
	}
	settingsFile := ""
	if len(cfg.HookCommand) > 0 {
		b, err := settingsJSON(cfg.HookCommand, cfg.HookTimeout)
		if err != nil {
			return Result{}, fmt.Errorf("claude-code runtime: %w", err)
		}
		settingsFile = filepath.Join(tmp, "settings.json")
		if err := os.WriteFile(settingsFile, b, 0o600); err != nil {
			return Result{}, fmt.Errorf("claude-code runtime: write settings: %w", err)
		}
	}
	argv := append([]string{shell, "-c", stdinScript, "claudert", promptFile, prog}, Args(cfg, systemFile, settingsFile)...)

	tail := &clitail.Writer{Max: stderrTail}
	var stderr io.Writer = tail
	if cfg.Stderr != nil {
		stderr = io.MultiWriter(cfg.Stderr, tail)
	}
	pr, pw := io.Pipe()
	var res Result
	var perr error
	var wg sync.WaitGroup
	wg.Go(func() {
		res, perr = ParseStream(pr, cfg.Transcript, cfg.Observer)
		_, _ = io.Copy(io.Discard, pr) // ParseStream reads to the end; this is the backstop
	})
	er, err := execrt.Run(ctx, execrt.Spec{
		Argv:    argv,
		Dir:     cfg.Dir,
		Env:     cfg.Env,
		Stdout:  pw,
		Stderr:  stderr,
		Timeout: cfg.Timeout,
	})
	pw.Close()
	wg.Wait()
	switch {
	case err != nil:
		return res, fmt.Errorf("claude-code runtime: %w", err)
	case er.TimedOut:
		return res, fmt.Errorf("claude-code runtime: killed after %s: %w", cfg.Timeout, ErrTimedOut)
	case er.Cancelled:
		return res, fmt.Errorf("claude-code runtime: cancelled: %w", context.Cause(ctx))
	case er.ExitCode != 0:
		detail := ""
		if len(res.Errors) > 0 {
			detail = res.Errors[0]
		}
		if detail == "" {
			detail = tail.String()
		}
		return res, &ExitError{ExitCode: er.ExitCode, Subtype: res.Subtype, Detail: clitail.OneLine(detail, maxDetail)}
	case perr != nil:
		return res, fmt.Errorf("claude-code runtime: %w", perr)
	}
	return res, nil
}
