// Package claudeadapter is the worker's adapter of the claude-code runtime: it runs Claude
// Code (package claudert) behind a loopback relay to the gateway's Anthropic routes, with
// agora's tool hook (hook*.go: `agora-worker worker hook`, a process of its own per tool
// event, reporting through the worker's hook relay) judging and auditing each call before it
// runs, claude's output read live for what no hook sees (hookaudit.go), and a learn
// dispatch's writes outside the workspace recorded and redirected (claudelearn.go).
package claudeadapter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/runtime/agentrun"
	"github.com/agora-dev/agora/internal/runtime/claudert"
	"github.com/agora-dev/agora/internal/secret/redact"
	"github.com/agora-dev/agora/internal/toolreg/builtin"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// Adapter runs Claude Code (`claude --print`) with the subagent's prompt, model and
// grant. claude calls the Anthropic API itself: it reaches the gateway through a loopback
// relay ([relay]), and the gateway adds the API key. Its own tools run under permission
// rules derived from the grant (package claudert), and each call is audited live: by
// claude's tool hooks, which are this binary (hook.go), before the tool runs and with its
// outcome, and from claude's output for what no hook sees (hookaudit.go).
type Adapter struct{}

// testOnlyHookProgram, when set, is the program claude runs as its tool hook instead of
// this binary (tests run the worker inside a test binary, which is no agora).
var testOnlyHookProgram string

// Run runs claude for inv.
func (Adapter) Run(ctx context.Context, inv agentrun.Invocation) (agentrun.Exit, error) {
	gw := inv.Gateway()
	defer gw.Close()
	grants := claudert.Grants{Set: inv.Grants}
	mcpPath := ""
	var err error
	if inv.MCPConfig != nil {
		if grants.MCPServers, err = claudert.MCPServerNames(bytes.NewReader(inv.MCPConfig)); err != nil {
			return agentrun.Exit{ExitCode: 1, Failure: err.Error()}, nil
		}
		f, err := os.CreateTemp(inv.Tmp, "agora-mcp-*.json")
		if err != nil {
			return agentrun.Exit{}, err
		}
		mcpPath = f.Name()
		defer os.Remove(mcpPath)
		_, werr := f.Write(inv.MCPConfig)
		if err := errors.Join(werr, f.Close()); err != nil {
			return agentrun.Exit{}, err
		}
		if mcpPath, err = filepath.Abs(mcpPath); err != nil {
			return agentrun.Exit{}, err
		}
	}
	hookProg, err := hookProgram(inv)
	if err != nil {
		return agentrun.Exit{}, err
	}
	// Refuse before claude starts if the dynamic loader could run code in its hooks' shell.
	if err := checkNoPreload(append(os.Environ(), inv.Env...)); err != nil {
		return agentrun.Exit{ExitCode: 1, Failure: "claude-code runtime: " + err.Error()}, nil
	}
	hooks, err := startHookRelay(gw)
	if err != nil {
		return agentrun.Exit{}, err
	}
	defer hooks.close()
	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	tools := claudert.Tools(grants)
	hook := hookConfig{gateway: hooks.name, tools: tools, mcp: grants.MCPServers, commands: grants.Commands,
		secretEnvs: secretNames(inv.Env, inv.Secrets), approve: inv.Grants.Approve, learn: inv.Learn}
	if inv.Learn {
		// A learn dispatch: claude loads and allows what the grant would refuse, and the
		// hook, judging by the real grant, reports each such call as would_deny first.
		grants = claudert.Grants{Set: learnWidened(inv.Grants), MCPServers: grants.MCPServers, LearnFetch: true}
		tools = claudert.Tools(grants)
	}
	// The relay token is in claude's environment, which Claude Code passes to its Bash
	// commands (it has no way to withhold it without a bubblewrap of its own): a command may
	// print it. It opens nothing outside the sandbox (docs/runtimes.md), and it is masked like
	// a secret in everything the worker keeps: audit reasons, the transcript, the answer.
	token, err := agentrun.NewRelayToken()
	if err != nil {
		return agentrun.Exit{}, err
	}
	red := redact.New(append(slices.Clone(inv.Secrets), []byte(token)))
	printed := newPrintedCalls(red)
	hooks.vouchWith(printed)
	if inv.Learn {
		// A Write outside the workspace is learned: recorded, then made in a scratch
		// directory, never at its path (claudelearn.go).
		scratch, err := builtin.NewScratch(inv.Tmp, inv.Dir)
		if err != nil {
			return agentrun.Exit{}, err
		}
		defer scratch.Close()
		hooks.learnWrites(&claudeWrites{scratch: scratch, gw: gw, printed: printed, dir: inv.Dir, done: map[string]bool{}})
	}
	audit := newClaudeAudit(gw, hooks, red, tools, grants.MCPServers, stop)
	audit.printed = printed
	audit.dir = inv.Dir

	rl, err := startRelay(audit.gate(gw), token)
	if err != nil {
		return agentrun.Exit{}, fmt.Errorf("start the model relay: %w", err)
	}
	defer rl.Close()
	tr, err := inv.OpenTranscript()
	if err != nil {
		return agentrun.Exit{}, err
	}
	defer tr.Close(inv.Stderr)
	set := map[string]string{
		"ANTHROPIC_BASE_URL":   rl.URL,
		"ANTHROPIC_AUTH_TOKEN": rl.Token,
		// No update checks, telemetry or error reports: there is no route for them.
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
		// No cross-session messaging: with it, claude listens on a Unix socket (named to
		// every command it runs, in CLAUDE_CODE_MESSAGING_SOCKET) where any process of its
		// uid, the agent's own commands included, queues user messages "from another Claude
		// session"; one queued after the model's answer starts another turn, whose answer
		// becomes claude's result, the final answer the worker vouches for (a review).
		// claude binds it on its own unless it runs as uid 65534, which it takes for an
		// unmapped one; a sandbox's uid is no promise.
		"CLAUDE_CODE_HARBOR_KITE": "0",
	}
	// The gateway refuses a request for any model but the subagent's:
	// every model slot claude has (its background "small fast" model, its subagents', each
	// family's default) is that model, so claude never asks for another.
	if inv.Model != "" {
		for _, k := range claudeModelEnv {
			set[k] = inv.Model
		}
	}
	env := agentrun.EnvWith(inv.Env, set)
	res, err := claudert.Run(runCtx, claudert.Config{
		Binary:       inv.Binary,
		SystemPrompt: inv.SystemPrompt,
		Model:        inv.Model,
		Grants:       grants,
		MCPConfig:    mcpPath,
		Dir:          inv.Dir,
		Env:          env,
		Timeout:      inv.Timeout,
		Stderr:       inv.Stderr,
		Transcript:   maskedLines{w: tr, red: red},
		TempDir:      inv.Tmp,
		HookCommand:  append([]string{hookProg, "worker", "hook"}, hook.args()...),
		HookTimeout:  hookTimeout(inv.ApprovalTimeout, len(hook.approve) > 0),
		Observer:     audit,
	}, inv.Prompt)
	audit.finish(context.WithoutCancel(ctx), res, err)
	if aerr := audit.failed(); aerr != nil {
		return agentrun.Exit{ExitCode: 1, Failure: "claude-code runtime: " + aerr.Error()}, nil
	}
	res.Final = red.String(res.Final)
	return claudeExit(ctx, res, err, inv)
}

// maskedLines writes each line (claude's stream-json events, one per Write) with red's values
// masked.
type maskedLines struct {
	w   io.Writer
	red *redact.Redactor
}

func (m maskedLines) Write(p []byte) (int, error) {
	if _, err := m.w.Write(m.red.Bytes(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// claudeModelEnv are the variables through which claude picks a model other than --model's.
var claudeModelEnv = []string{
	"ANTHROPIC_MODEL", "ANTHROPIC_SMALL_FAST_MODEL", "ANTHROPIC_DEFAULT_HAIKU_MODEL",
	"ANTHROPIC_DEFAULT_SONNET_MODEL", "ANTHROPIC_DEFAULT_OPUS_MODEL", "CLAUDE_CODE_SUBAGENT_MODEL",
}

// hookProgram is the worker program claude runs as its tool hook: the sandbox's
// /agora/bin/agora-worker when the layout has it, else this process's own executable (a target
// with `sandbox: none` runs the host's pinned copy of agora-worker).
func hookProgram(inv agentrun.Invocation) (string, error) {
	if testOnlyHookProgram != "" {
		return testOnlyHookProgram, nil
	}
	p := filepath.Join(filepath.Dir(inv.Out), wire.BinDir, wire.BinFile)
	if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
		return p, nil
	}
	p, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find the worker program for claude's tool hook: %w", err)
	}
	return p, nil
}

// secretNames returns the names of the variables of env that hold one of the secret values,
// sorted: the hook finds the values in its own environment, which is claude's.
func secretNames(env []string, secrets [][]byte) []string {
	var names []string
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if ok && slices.ContainsFunc(secrets, func(s []byte) bool { return len(s) > 0 && string(s) == v }) {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// claudeExit maps how claude ended to the agent's exit.
func claudeExit(ctx context.Context, res claudert.Result, err error, inv agentrun.Invocation) (agentrun.Exit, error) {
	var nf *claudert.NotFoundError
	var ee *claudert.ExitError
	switch {
	case errors.Is(err, claudert.ErrTimedOut):
		return agentrun.Exit{ExitCode: -1, TimedOut: true, Failure: fmt.Sprintf("claude killed at its budget of %s", inv.Timeout)}, nil
	case err != nil && ctx.Err() != nil:
		return agentrun.Exit{ExitCode: -1, Failure: "claude cancelled"}, nil
	case errors.As(err, &nf):
		return agentrun.Exit{ExitCode: 127, Failure: err.Error() + "; install Claude Code on the host (npm install -g @anthropic-ai/claude-code) or set runtimes.claude-code.binary in agora.yaml (see docs/runtimes.md)"}, nil
	case errors.As(err, &ee):
		return agentrun.Exit{ExitCode: max(ee.ExitCode, 1), Failure: err.Error()}, nil
	case err != nil:
		return agentrun.Exit{ExitCode: 1, Failure: err.Error()}, nil
	case res.IsError:
		return agentrun.Exit{ExitCode: 1, Failure: fmt.Sprintf("claude-code runtime: result %s", res.Subtype)}, nil
	}
	final := res.Final
	fmt.Fprintln(inv.Stdout, final)
	return agentrun.Exit{Final: &final}, nil
}

// hookTimeout is the timeout claude gives its hooks: the default, or, when calls may be
// held, the approval timeout and a minute for the hook's own reports, so claude never lets
// a held call through because its hook took long.
func hookTimeout(approval time.Duration, holds bool) int {
	if !holds {
		return 0
	}
	return max(claudert.HookTimeout, int(approval/time.Second)+60)
}

// learnWidened is what claude's own fence allows in a learn dispatch: every agora tool and
// any shell line, the grant's approve rules as they are (a held call is still held). WebFetch
// goes to any host as far as claude is concerned (claudert.Grants.LearnFetch): the egress
// proxy judges each, learning a host of egress.learn_hosts and refusing any other.
func learnWidened(g grant.Set) grant.Set {
	w := g.Clone()
	w.Tools = []string{"read_file", "write_file", "list_files", "search_files", "run_command", "http_fetch"}
	w.Commands = append(w.Commands, "bash -c *")
	return w
}

// relayPrefix is the only path prefix claude's relay forwards: the gateway's Anthropic routes.
const relayPrefix = "/anthropic/"

// startRelay listens on 127.0.0.1:0 and serves claude's Anthropic requests carrying token
// (agentrun.NewRelayToken) until close.
func startRelay(gw *agentrun.Gateway, token string) (*agentrun.Relay, error) {
	return agentrun.StartRelay(gw, token, relayPrefix, func(p string) bool { return strings.HasPrefix(p, relayPrefix) }, nil)
}
