package worker

import (
	"context"
	"fmt"

	"github.com/agora-dev/agora/internal/runtime/openairt"
)

// Budgets of the openai loop. Its wall time is the agent's budget.
const (
	openaiMaxTurns = 50
	// openaiBaseURL reaches the gateway's OpenAI routes: /model/chat/completions.
	openaiBaseURL = gatewayBase + "/model"
)

// openaiRuntime runs the OpenAI-compatible tool loop in the worker process. The model sees
// the tools of the subagent's view only; every call, allowed or refused, is reported to the
// gateway before its result reaches the model; model requests and fetches leave through the
// gateway, which holds the API key.
type openaiRuntime struct{}

func (openaiRuntime) Run(ctx context.Context, inv invocation) (agentExit, error) {
	gw := inv.gatewayClient()
	defer gw.close()
	lctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	audit := &toolAuditor{gw: gw, stop: cancel}
	view, err := newView(inv, gw, audit)
	if err != nil {
		return agentExit{}, err
	}
	tr, err := inv.openTranscript()
	if err != nil {
		return agentExit{}, err
	}
	defer tr.close(inv.stderr)

	res, err := openairt.Run(lctx, openairt.Config{
		BaseURL:      openaiBaseURL,
		Model:        inv.model,
		SystemPrompt: inv.systemPrompt,
		Client:       gw.http,
		MaxTurns:     openaiMaxTurns,
		WallTime:     inv.timeout,
		Transcript:   tr,
	}, viewTools{view: view, audit: audit}, inv.prompt)
	fmt.Fprintf(inv.stderr, "agora worker: openai: %d turns, %d prompt and %d completion tokens\n",
		res.Turns, res.PromptTokens, res.CompletionTokens)
	return openaiExit(ctx, res, err, audit.failed(), inv)
}

// openaiExit maps how the loop ended to the agent's exit.
func openaiExit(ctx context.Context, res openairt.Result, err, auditErr error, inv invocation) (agentExit, error) {
	switch {
	case auditErr != nil:
		return agentExit{ExitCode: 1, Failure: fmt.Sprintf("tool call not audited, the loop was stopped: %v", auditErr)}, nil
	case err != nil && ctx.Err() != nil:
		return agentExit{ExitCode: 1, Failure: "model loop cancelled"}, nil
	case err != nil:
		return agentExit{ExitCode: 1, Failure: fmt.Sprintf("model loop: %v", err)}, nil
	case res.Stopped == openairt.StoppedWallTime:
		return agentExit{ExitCode: 1, TimedOut: true,
			Failure: fmt.Sprintf("model loop stopped at its wall-time budget of %s after %d turns", inv.timeout, res.Turns)}, nil
	case res.Stopped != "":
		return agentExit{ExitCode: 1, Failure: fmt.Sprintf("model loop stopped: %s budget spent after %d turns", res.Stopped, res.Turns)}, nil
	case res.NeedsInput != "":
		return agentExit{Question: res.NeedsInput}, nil
	}
	final := res.Final
	fmt.Fprintln(inv.stdout, final)
	return agentExit{Final: &final}, nil
}
