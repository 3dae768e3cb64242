package codexrt

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/agora-dev/agora/internal/runtime/agentproc"
	"github.com/agora-dev/agora/internal/runtime/execrt"
)

// ErrTimedOut means codex ran past Config.Timeout and its process group was killed.
var ErrTimedOut = agentproc.ErrTimedOut

// NotFoundError means the codex executable is not on the PATH of Config.Env (or not at the
// path given).
type NotFoundError = agentproc.NotFoundError

// ExitError means codex exited non-zero or its turn failed; Detail is codex's last error
// message or else the tail of its stderr.
type ExitError = agentproc.ExitError

// runtimeName is what codexrt's errors say they come from.
const runtimeName = Name

// Config is one codex run.
type Config struct {
	Binary       string // the codex executable; "" looks up "codex" on Env's PATH
	Model        string
	SystemPrompt string
	// BaseURL is the provider's base URL (codex POSTs BaseURL+"/responses"); Token is the
	// bearer token it sends there (a relay token, never a model key). The token is in
	// config.toml only, never in codex's environment.
	BaseURL, Token string
	// ForgetToken, when not nil, is called before codex starts with a function that rewrites
	// config.toml without the token. The caller calls it once codex has sent its first
	// request with the token (so codex has read its config), before that request is
	// answered: the token then leaves the file before any command of codex's can run (one
	// runs only on the model's answer). Calls after the first, and after Run returned, do
	// nothing. nil leaves the token in the file until Run returns.
	ForgetToken func(forget func())
	Dir         string   // the workspace codex works in
	Env         []string // codex's whole environment; CODEX_HOME and the token are added
	Timeout     time.Duration
	Stderr      io.Writer // codex's stderr, besides the tail Run keeps
	Transcript  io.Writer // the JSONL events, unredacted
	TempDir     string    // where the private CODEX_HOME is made
	Observer    Observer
}

// Args is codex's argv after the program name.
func Args() []string {
	return []string{"exec", "--json", "--strict-config", "--skip-git-repo-check", "-"}
}

// Run runs codex once on prompt and returns what it produced. The JSONL output is parsed
// as it arrives, written to cfg.Transcript and shown to cfg.Observer. It returns a
// [*NotFoundError], [ErrTimedOut], ctx's error, an [*ExitError] when codex exits non-zero or
// its turn failed, or a parse error; the Result holds whatever was parsed in every case.
func Run(ctx context.Context, cfg Config, prompt string) (Result, error) {
	name := cmp.Or(cfg.Binary, "codex")
	path := execrt.EnvValue(cfg.Env, "PATH")
	prog, err := execrt.LookPath(name, path)
	if err != nil {
		return Result{}, &NotFoundError{Runtime: runtimeName, Name: name, PATH: path, Err: err}
	}
	conf, err := ConfigTOML(cfg.Model, cfg.BaseURL, cfg.SystemPrompt, cfg.Token)
	if err != nil {
		return Result{}, err
	}
	home, err := os.MkdirTemp(cfg.TempDir, "codexrt-")
	if err != nil {
		return Result{}, fmt.Errorf("codex runtime: create CODEX_HOME: %w", err)
	}
	defer os.RemoveAll(home)
	if home, err = filepath.Abs(home); err != nil {
		return Result{}, fmt.Errorf("codex runtime: %w", err)
	}
	if err := os.WriteFile(filepath.Join(home, "config.toml"), conf, 0o600); err != nil {
		return Result{}, fmt.Errorf("codex runtime: write config.toml: %w", err)
	}
	promptFile := filepath.Join(home, "prompt")
	if err := os.WriteFile(promptFile, []byte(prompt), 0o600); err != nil {
		return Result{}, fmt.Errorf("codex runtime: write prompt: %w", err)
	}
	if cfg.ForgetToken != nil {
		// Without the token, what codex reads is the same config: were it to read it again,
		// its requests would carry no token, and the relay refuses them.
		bare, err := ConfigTOML(cfg.Model, cfg.BaseURL, cfg.SystemPrompt, "")
		if err != nil {
			return Result{}, err
		}
		var mu sync.Mutex
		done := false
		defer func() { mu.Lock(); done = true; mu.Unlock() }()
		cfg.ForgetToken(func() {
			mu.Lock()
			defer mu.Unlock()
			if done {
				return
			}
			done = true
			if err := rewriteFile(filepath.Join(home, "config.toml"), bare); err != nil && cfg.Stderr != nil {
				fmt.Fprintf(cfg.Stderr, "codex runtime: rewrite config.toml without the token: %v\n", err)
			}
		})
	}
	env := withEnv(cfg.Env, map[string]string{"CODEX_HOME": home})
	// `codex exec -` reads the prompt on stdin, which keeps it out of argv.
	argv := agentproc.StdinArgv("codexrt", promptFile, prog, Args()...)
	stderr, tail := agentproc.Stderr(cfg.Stderr)
	pr, pw := io.Pipe()
	var res Result
	var perr error
	var wg sync.WaitGroup
	// An output line codex's reader cannot read exactly stops codex: what it did next would
	// be shown to no Observer, so it would run unchecked.
	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	wg.Go(func() {
		res, perr = parseStream(pr, cfg.Transcript, cfg.Observer, stop)
		_, _ = io.Copy(io.Discard, pr)
	})
	er, err := execrt.Run(runCtx, execrt.Spec{Argv: argv, Dir: cfg.Dir, Env: env, Stdout: pw, Stderr: stderr, Timeout: cfg.Timeout})
	pw.Close()
	wg.Wait()
	detail := func() string {
		if len(res.Errors) > 0 {
			return agentproc.OneLine(res.Errors[len(res.Errors)-1], agentproc.MaxDetail)
		}
		return agentproc.OneLine(tail.String(), agentproc.MaxDetail)
	}
	switch {
	case err != nil:
		return res, fmt.Errorf("codex runtime: %w", err)
	case perr != nil && ctx.Err() == nil && er.Cancelled:
		return res, fmt.Errorf("codex runtime: %w; codex was stopped", perr)
	case er.TimedOut:
		return res, fmt.Errorf("codex runtime: killed after %s: %w", cfg.Timeout, ErrTimedOut)
	case er.Cancelled:
		return res, fmt.Errorf("codex runtime: cancelled: %w", context.Cause(ctx))
	case er.ExitCode != 0:
		return res, &ExitError{Runtime: runtimeName, CLI: "codex", ExitCode: er.ExitCode, Detail: detail()}
	case perr != nil:
		return res, fmt.Errorf("codex runtime: %w", perr)
	case res.Failed:
		return res, &ExitError{Runtime: runtimeName, CLI: "codex", ExitCode: 1, Detail: detail()}
	}
	return res, nil
}

// withEnv returns env with the variables of set replaced or added.
func withEnv(env []string, set map[string]string) []string {
	out := make([]string, 0, len(env)+len(set))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := set[k]; !ok {
			out = append(out, kv)
		}
	}
	for _, k := range []string{"CODEX_HOME", EnvKey} {
		if v, ok := set[k]; ok {
			out = append(out, k+"="+v)
		}
	}
	return out
}

// rewriteFile replaces path's content with b: a new file renamed over it, so a reader has
// the old bytes or the new, and the old inode (the token's) is unlinked.
func rewriteFile(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".config-*")
	if err != nil {
		return err
	}
	_, werr := f.Write(b)
	if err := errors.Join(werr, f.Close()); err != nil {
		os.Remove(f.Name())
		return err
	}
	return os.Rename(f.Name(), path)
}
