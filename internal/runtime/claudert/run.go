package claudert

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/agora-dev/agora/internal/runtime/agentproc"
	"github.com/agora-dev/agora/internal/runtime/execrt"
)

// ErrTimedOut means claude ran past Config.Timeout and its process group was killed.
var ErrTimedOut = agentproc.ErrTimedOut

// NotFoundError means the claude executable is not on the PATH of Config.Env (or not at the
// path given); Name is Config.Binary, or "claude".
type NotFoundError = agentproc.NotFoundError

// ExitError means claude exited with a non-zero status (or was killed by a signal); Subtype
// is its result event's subtype, Detail the result's first error message or else the tail
// of its stderr.
type ExitError = agentproc.ExitError

// runtimeName is what claudert's errors say they come from.
const runtimeName = Name

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
	name := cmp.Or(cfg.Binary, "claude")
	path := execrt.EnvValue(cfg.Env, "PATH")
	prog, err := execrt.LookPath(name, path)
	if err != nil {
		return Result{}, &NotFoundError{Runtime: runtimeName, Name: name, PATH: path, Err: err}
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
	argv := agentproc.StdinArgv("claudert", promptFile, prog, Args(cfg, systemFile, settingsFile)...)
	stderr, tail := agentproc.Stderr(cfg.Stderr)
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
		return res, &ExitError{Runtime: runtimeName, CLI: "claude", ExitCode: er.ExitCode, Subtype: res.Subtype,
			Detail: agentproc.OneLine(detail, agentproc.MaxDetail)}
	case perr != nil:
		return res, fmt.Errorf("claude-code runtime: %w", perr)
	}
	return res, nil
}
