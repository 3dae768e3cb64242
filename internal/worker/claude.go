package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/agora-dev/agora/internal/runtime/claudert"
	"github.com/agora-dev/agora/internal/toolreg"
)

// MCPConfigFile is the file at the root of a capability that holds its MCP servers, in the
// shape claude's --mcp-config takes ({"mcpServers": {...}}). The claude-code runtime loads it
// from the verified archive, never from the workspace, and pre-approves its servers' tools.
const MCPConfigFile = "mcp.json"

// claudeReason is the audit reason of a tool use claude made on its own permission rules.
const (
	claudeAllowed = "claude-code: allowed by the permission rules derived from the grant"
	claudeDenied  = "claude-code: denied by the permission rules derived from the grant"
)

// claudeRuntime runs Claude Code (`claude --print`) with the subagent's prompt, model and
// grant. claude calls the Anthropic API itself: it reaches the gateway through a loopback
// relay ([relay]), and the gateway adds the API key. Its own tools run under permission
// rules derived from the grant (package claudert); each use and each denial is reported to
// the gateway's audit after the run, from claude's stream-json account.
type claudeRuntime struct{}

func (claudeRuntime) Run(ctx context.Context, inv invocation) (agentExit, error) {
	gw := dialGateway(inv.gateway)
	defer gw.close()
	rl, err := startRelay(gw)
	if err != nil {
		return agentExit{}, fmt.Errorf("start the model relay: %w", err)
	}
	defer rl.close()
	grants := claudert.Grants{Tools: inv.grants.Tools, Commands: inv.grants.Commands, Egress: inv.grants.Egress}
	mcpPath := ""
	if inv.mcpConfig != nil {
		if grants.MCPServers, err = claudert.MCPServerNames(bytes.NewReader(inv.mcpConfig)); err != nil {
			return agentExit{ExitCode: 1, Failure: err.Error()}, nil
		}
		f, err := os.CreateTemp(inv.tmp, "agora-mcp-*.json")
		if err != nil {
			return agentExit{}, err
		}
		mcpPath = f.Name()
		defer os.Remove(mcpPath)
		_, werr := f.Write(inv.mcpConfig)
		if err := errors.Join(werr, f.Close()); err != nil {
			return agentExit{}, err
		}
		if mcpPath, err = filepath.Abs(mcpPath); err != nil {
			return agentExit{}, err
		}
	}
	tr, err := openTranscript(inv.out)
	if err != nil {
		return agentExit{}, err
	}
	defer tr.close(inv.stderr)
	env := envWith(inv.env, map[string]string{
		"ANTHROPIC_BASE_URL":   rl.URL,
		"ANTHROPIC_AUTH_TOKEN": rl.Token,
		// No update checks, telemetry or error reports: there is no route for them.
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
	})
	res, err := claudert.Run(ctx, claudert.Config{
		SystemPrompt: inv.systemPrompt,
		Model:        inv.model,
		Grants:       grants,
		MCPConfig:    mcpPath,
		Dir:          inv.dir,
		Env:          env,
		Timeout:      inv.timeout,
		Stderr:       inv.stderr,
		Transcript:   tr,
		TempDir:      inv.tmp,
	}, inv.prompt)
	if aerr := reportClaudeTools(ctx, gw, inv, res); aerr != nil {
		return agentExit{ExitCode: 1, Failure: fmt.Sprintf("claude's tool uses not audited: %v", aerr)}, nil
	}
	return claudeExit(ctx, res, err, inv)
}

// claudeExit maps how claude ended to the agent's exit.
func claudeExit(ctx context.Context, res claudert.Result, err error, inv invocation) (agentExit, error) {
	var nf *claudert.NotFoundError
	var ee *claudert.ExitError
	switch {
	case errors.Is(err, claudert.ErrTimedOut):
		return agentExit{ExitCode: -1, TimedOut: true, Failure: fmt.Sprintf("claude killed at its budget of %s", inv.timeout)}, nil
	case err != nil && ctx.Err() != nil:
		return agentExit{ExitCode: -1, Failure: "claude cancelled"}, nil
	case errors.As(err, &nf):
		return agentExit{ExitCode: 127, Failure: err.Error() + "; install Claude Code where the sandbox sees it (see docs/runtimes.md)"}, nil
	case errors.As(err, &ee):
		return agentExit{ExitCode: max(ee.ExitCode, 1), Failure: err.Error()}, nil
	case err != nil:
		return agentExit{ExitCode: 1, Failure: err.Error()}, nil
	case res.IsError:
		return agentExit{ExitCode: 1, Failure: fmt.Sprintf("claude-code runtime: result %s", res.Subtype)}, nil
	}
	final := res.Final
	fmt.Fprintln(inv.stdout, final)
	return agentExit{Final: &final}, nil
}

// reportClaudeTools reports each tool use claude made, and each it was denied, as a tool
// decision of the dispatch's role.
func reportClaudeTools(ctx context.Context, gw *gatewayClient, inv invocation, res claudert.Result) error {
	ctx = context.WithoutCancel(ctx)
	for _, u := range res.ToolUses {
		d := toolreg.Decision{DispatchID: inv.dispatchID, Role: inv.role, Tool: u.Name,
			Decision: toolreg.DecisionAllowed, Reason: claudeAllowed, ArgsHash: "sha256:" + u.InputSHA256}
		if slices.ContainsFunc(res.Denials, func(x claudert.ToolUse) bool { return x.ID == u.ID }) {
			d.Decision, d.Reason = toolreg.DecisionDenied, claudeDenied
		}
		if err := gw.reportTool(ctx, d); err != nil {
			return err
		}
	}
	for _, u := range res.Denials {
		if slices.ContainsFunc(res.ToolUses, func(x claudert.ToolUse) bool { return x.ID == u.ID }) {
			continue
		}
		d := toolreg.Decision{DispatchID: inv.dispatchID, Role: inv.role, Tool: u.Name,
			Decision: toolreg.DecisionDenied, Reason: claudeDenied, ArgsHash: "sha256:" + u.InputSHA256}
		if err := gw.reportTool(ctx, d); err != nil {
			return err
		}
	}
	return nil
}
