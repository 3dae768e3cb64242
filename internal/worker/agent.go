package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/runtime/agentrun"
	"github.com/agora-dev/agora/internal/runtime/runtimes/adapters"
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
	input := cmp.Or(m.InputJSON, "{}")
	env["AGORA_INPUT_JSON"] = input
	env["AGORA_DISPATCH_ID"] = m.DispatchID
	env["AGORA_OUT"] = filepath.Join(root, wire.OutDir)
	env["AGORA_WORKSPACE"] = filepath.Join(root, wire.WorkspaceDir)
	trustWorkspaceRoot(env, env["AGORA_WORKSPACE"])
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
// it (codex's workdir, a cd) would run anything. safe.bareRepository is
// read only from protected configuration, which GIT_CONFIG_COUNT is (command-line scope);
// it is added after any pairs the env bundle set.
func refuseImplicitBareRepos(env map[string]string) {
	addGitConfig(env, "safe.bareRepository", "explicit")
}

// runtimeFor returns the adapter for a runtime name, from the one table of adapters
// (package runtimes/adapters, generated from runtimes.All). A name the manifest format knows
// but this build cannot run is refused here, before anything runs.
func runtimeFor(name string) (agentrun.Adapter, error) {
	if a, ok := adapters.For(name); ok {
		return a, nil
	}
	return nil, fmt.Errorf("runtime %q is not available in this build", name)
}

// runAgent runs the runtime under the agent budget.
func (r *runner) runAgent(ctx context.Context) *failure {
	secrets := make([][]byte, 0, len(r.secrets))
	for _, k := range slices.Sorted(maps.Keys(r.secrets)) {
		secrets = append(secrets, []byte(r.secrets[k]))
	}
	r.transcript = &agentrun.Transcript{}
	r.answerSealed, r.answerWhy = r.answerChannel()
	exit, err := r.rt.Run(ctx, agentrun.Invocation{
		Command: r.man.Command,
		Dir:     r.workspace,
		Env:     r.env,
		Stdout:  r.opts.Stdout,
		Stderr:  r.opts.Stderr,
		Timeout: time.Duration(r.man.AgentTimeoutSeconds) * time.Second,

		DispatchID:      r.man.DispatchID,
		Role:            r.man.Subagent.Name + "@" + string(r.man.Subagent.Digest),
		Grants:          r.man.Grants.Set(),
		Learn:           r.man.Learn,
		WorkerKey:       r.workerKey,
		ApprovalTimeout: time.Duration(r.man.ApprovalTimeoutSeconds) * time.Second,
		Model:           r.doc.Model,
		SystemPrompt:    r.doc.SystemPrompt,
		Prompt:          userPrompt(r.man.InputJSON),
		Secrets:         secrets,
		Out:             r.out,
		Transcript:      r.transcript,
		Tmp:             r.opts.TempDir,
		GatewaySocket:   r.gateway,
		DialHost:        r.opts.dialHost,
		MCPConfig:       r.mcpConfig,
		Binary:          runtimeBinaryPath(r.man),
	})
	if err != nil {
		return fail(lifecycle.ReasonWorkerFailed, "start agent: %v", err)
	}
	r.exit = exit
	r.res.ExitCode = exit.ExitCode
	switch {
	case exit.TimedOut && exit.Failure != "":
		return fail(lifecycle.ReasonTimeout, "%s", exit.Failure)
	case exit.TimedOut:
		return fail(lifecycle.ReasonTimeout, "agent killed after %ds", r.man.AgentTimeoutSeconds)
	case exit.Failure != "":
		return fail(lifecycle.ReasonWorkerFailed, "%s", exit.Failure)
	case exit.ExitCode != 0:
		// A question is a legitimate way to stop; needsInput decides. A model runtime's
		// question is the model's own: a file the agent left does not count.
		if exit.Question != "" || !r.modelRuntime() && r.hasNeedsInput() {
			return nil
		}
		return fail(lifecycle.ReasonWorkerFailed, "agent exited with code %d", exit.ExitCode)
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
		return fail(lifecycle.ReasonWorkerFailed, "needs_input: %v", err)
	}
	n, err := wire.ParseNeedsInput(b)
	if err != nil {
		return fail(lifecycle.ReasonWorkerFailed, "needs_input: %v", err)
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
