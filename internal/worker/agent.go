package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/runtime/claudert"
	"github.com/agora-dev/agora/internal/runtime/codexrt"
	"github.com/agora-dev/agora/internal/runtime/execrt"
	"github.com/agora-dev/agora/internal/runtime/openairt"
	"github.com/agora-dev/agora/internal/sandboxfs"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// agentPath is the PATH the agent starts with, unless the env bundle sets one.
const agentPath = "/usr/local/bin:/usr/bin:/bin"

// agentEnv is the complete environment of setup scripts and the agent: a base, then the
// bundle's plain values, then the secrets, then agora's own keys, each layer winning over the
// ones before (the host already refuses AGORA_* in bundles; the manifest parser too). With the
// egress proxy, its variables come last: a bundle cannot point the agent around it (there is
// no other way out of the sandbox anyway) nor at another trust store.
func agentEnv(m wire.Manifest, secrets map[string]string, root, tmp string, proxy *proxyRelay) []string {
	env := map[string]string{
		"PATH": agentPath,
		"HOME": tmp,
		"LANG": "C.UTF-8",
	}
	for k, v := range m.Env {
		env[k] = v
	}
	for k, v := range secrets {
		env[k] = v
	}
	refuseImplicitBareRepos(env)
	input := m.InputJSON
	if input == "" {
		input = "{}"
	}
	env["AGORA_INPUT_JSON"] = input
	env["AGORA_DISPATCH_ID"] = m.DispatchID
	env["AGORA_OUT"] = filepath.Join(root, wire.OutDir)
	env["AGORA_WORKSPACE"] = filepath.Join(root, wire.WorkspaceDir)
	env[wire.CapabilitiesEnv] = filepath.Join(root, wire.CapabilityFilesDir)
	if fi, err := os.Stat(filepath.Join(root, wire.InputsDir)); err == nil && fi.IsDir() {
		env["AGORA_INPUTS"] = filepath.Join(root, wire.InputsDir)
	}
	if proxy != nil {
		maps.Copy(env, proxyEnv(proxy.URL(), root))
	}
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

// refuseImplicitBareRepos makes every git in the sandbox refuse a directory it would take for
// a bare repository by its look (HEAD, objects/, refs/ and a config beside them): such a
// config is the agent's or the repository's own writing, and names programs git runs
// (core.fsmonitor with core.worktree runs on `git status`), so a granted git command run in
// it (codex's workdir, a cd) would run anything (issue 26 red team). safe.bareRepository is
// read only from protected configuration, which GIT_CONFIG_COUNT is (command-line scope);
// it is added after any pairs the env bundle set.
func refuseImplicitBareRepos(env map[string]string) {
	n, err := strconv.Atoi(env["GIT_CONFIG_COUNT"])
	if err != nil || n < 0 || n > 1000 {
		n = 0
	}
	env["GIT_CONFIG_KEY_"+strconv.Itoa(n)] = "safe.bareRepository"
	env["GIT_CONFIG_VALUE_"+strconv.Itoa(n)] = "explicit"
	env["GIT_CONFIG_COUNT"] = strconv.Itoa(n + 1)
}

// agentRuntime runs the agent. Each runtime a build supports has an adapter in this package
// from an [invocation] to its own API; runtimeFor picks it.
type agentRuntime interface {
	Run(ctx context.Context, inv invocation) (agentExit, error)
}

// invocation is everything a runtime gets.
type invocation struct {
	command        []string // exec: argv, granted by the capabilities
	dir            string   // the workspace
	env            []string
	stdout, stderr io.Writer
	timeout        time.Duration

	// The model runtimes (openai, claude-code) also get these.
	dispatchID   string
	role         string // "subagent@sha256:<hex>", the view's and the audit's
	grants       grant.Set
	model        string
	systemPrompt string
	prompt       string          // the user prompt, from the input
	secrets      [][]byte        // the bundle's secret values, masked in audited argument hashes
	out          string          // the out directory
	transcript   *transcriptFile // the model runtimes' transcript, kept in memory (answer.go)
	tmp          string          // private scratch, outside the workspace
	gateway      string          // the gateway's socket
	// dialHost, in remote mode, connects to a host socket by name through the network
	// gateway; nil elsewhere.
	dialHost  func(ctx context.Context, socket string) (net.Conn, error)
	mcpConfig []byte // the capabilities' MCP config (claude-code), nil for none
	// binary is the runtime's CLI as the host bound it (read-only, outside the workspace);
	// "" looks the program up on the sandbox's PATH.
	binary string
	// approvalTimeout is the longest a call held for approval waits (the manifest's).
	approvalTimeout time.Duration
	// learn: a learn dispatch (the manifest's): the runtimes' gates report what the grant
	// would refuse as would_deny, then let it run (docs/learn.md).
	learn bool
	// workerKey is the key the worker claimed the gateway with ("" outside learn).
	workerKey string
}

// agentExit is how the agent ended.
type agentExit struct {
	ExitCode int // -1 when killed by a signal
	TimedOut bool
	// Failure, when not empty, fails the dispatch (worker-failed, or timeout with TimedOut)
	// with this detail: how an in-process runtime reports a loop that ended without an
	// answer.
	Failure string
	// Final is the model's last answer; the worker writes it to out/outputs/final.md.
	Final *string
	// Question is a question for a person; the worker writes it to out/needs_input.json
	// and the dispatch ends needs_input.
	Question string
}

// runtimeFor returns the adapter for a runtime name. A name the manifest format knows but this
// build cannot run is refused here, before anything runs.
func runtimeFor(name string) (agentRuntime, error) {
	switch name {
	case execrt.Name:
		return execRuntime{}, nil
	case openairt.Name:
		return openaiRuntime{}, nil
	case claudert.Name:
		return claudeRuntime{}, nil
	case codexrt.Name:
		return codexRuntime{}, nil
	}
	return nil, fmt.Errorf("runtime %q is not available in this build", name)
}

// execRuntime runs the subagent's command as it is.
type execRuntime struct{}

func (execRuntime) Run(ctx context.Context, inv invocation) (agentExit, error) {
	res, err := execrt.Run(ctx, execrt.Spec{
		Argv:    inv.command,
		Dir:     inv.dir,
		Env:     inv.env,
		Stdout:  inv.stdout,
		Stderr:  inv.stderr,
		Timeout: inv.timeout,
	})
	if err != nil {
		return agentExit{}, err
	}
	return agentExit{ExitCode: res.ExitCode, TimedOut: res.TimedOut}, nil
}

// runAgent runs the runtime under the agent budget.
func (r *runner) runAgent(ctx context.Context) *failure {
	secrets := make([][]byte, 0, len(r.secrets))
	for _, k := range slices.Sorted(maps.Keys(r.secrets)) {
		secrets = append(secrets, []byte(r.secrets[k]))
	}
	r.transcript = &transcriptFile{}
	exit, err := r.rt.Run(ctx, invocation{
		command: r.man.Command,
		dir:     r.workspace,
		env:     r.env,
		stdout:  r.opts.Stdout,
		stderr:  r.opts.Stderr,
		timeout: time.Duration(r.man.AgentTimeoutSeconds) * time.Second,

		dispatchID:      r.man.DispatchID,
		role:            r.man.Subagent.Name + "@" + string(r.man.Subagent.Digest),
		grants:          r.man.Grants.Set(),
		learn:           r.man.Learn,
		workerKey:       r.workerKey,
		approvalTimeout: time.Duration(r.man.ApprovalTimeoutSeconds) * time.Second,
		model:           r.doc.Model,
		systemPrompt:    r.doc.SystemPrompt,
		prompt:          userPrompt(r.man.InputJSON),
		secrets:         secrets,
		out:             r.out,
		transcript:      r.transcript,
		tmp:             r.opts.TempDir,
		gateway:         r.gateway,
		dialHost:        r.opts.dialHost,
		mcpConfig:       r.mcpConfig,
		binary:          runtimeBinaryPath(r.man),
	})
	if err != nil {
		return fail(wire.ReasonWorkerFailed, "start agent: %v", err)
	}
	r.exit = exit
	r.res.ExitCode = exit.ExitCode
	switch {
	case exit.TimedOut && exit.Failure != "":
		return fail(wire.ReasonTimeout, "%s", exit.Failure)
	case exit.TimedOut:
		return fail(wire.ReasonTimeout, "agent killed after %ds", r.man.AgentTimeoutSeconds)
	case exit.Failure != "":
		return fail(wire.ReasonWorkerFailed, "%s", exit.Failure)
	case exit.ExitCode != 0:
		// A question is a legitimate way to stop; needsInput decides.
		if exit.Question != "" || r.hasNeedsInput() {
			return nil
		}
		return fail(wire.ReasonWorkerFailed, "agent exited with code %d", exit.ExitCode)
	}
	return nil
}

func (r *runner) hasNeedsInput() bool {
	_, err := os.Lstat(filepath.Join(r.out, wire.NeedsInputFile))
	return err == nil
}

// readOut reads out/rel the way the host does (package sandboxfs).
func readOut(out, rel string, limit int64) ([]byte, error) {
	d, err := sandboxfs.Open(out)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.ReadFile(rel, limit)
}

// needsInput reads out/needs_input.json when the agent left one. It must be a regular file
// (a symlink or a FIFO planted there is refused, never followed or blocked on).
func (r *runner) needsInput(ctx context.Context) *failure {
	b, err := readOut(r.out, wire.NeedsInputFile, wire.MaxNeedsInputFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fail(wire.ReasonWorkerFailed, "needs_input: %v", err)
	}
	n, err := wire.ParseNeedsInput(b)
	if err != nil {
		return fail(wire.ReasonWorkerFailed, "needs_input: %v", err)
	}
	if r.res.Status == wire.StatusOK {
		r.res.Status = wire.StatusNeedsInput
		r.res.NeedsInput = &n
	}
	return nil
}

// runtimeBinaryPath is where the manifest says the host bound the runtime's CLI, or "".
func runtimeBinaryPath(m wire.Manifest) string {
	if m.RuntimeBinary == nil {
		return ""
	}
	return m.RuntimeBinary.Path
}
