// Package openaiadapter is the worker's adapter of the openai runtime: package openairt's
// tool loop, in the worker process, over a [toolreg.View] of the built-in tools (tools.go),
// each call reported to the gateway before its result reaches the model, a held call waiting
// at the gateway's /approval (approval.go).
package openaiadapter

import (
	"context"
	"fmt"

	"github.com/agora-dev/agora/internal/runtime/agentrun"
	"github.com/agora-dev/agora/internal/runtime/openairt"
)

// Budgets of the openai loop. Its wall time is the agent's budget.
const (
	openaiMaxTurns = 50
	// openaiBaseURL reaches the gateway's OpenAI routes: /model/chat/completions.
	openaiBaseURL = agentrun.GatewayBase + "/model"
)

// Adapter runs the OpenAI-compatible tool loop in the worker process. The model sees
// the tools of the subagent's view only; every call, allowed or refused, is reported to the
// gateway before its result reaches the model; model requests and fetches leave through the
// gateway, which holds the API key.
type Adapter struct{}

// Run runs the loop for inv.
func (Adapter) Run(ctx context.Context, inv agentrun.Invocation) (agentrun.Exit, error) {
	gw := inv.Gateway()
	defer gw.Close()
	lctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	audit := &toolAuditor{gw: gw, stop: cancel}
	view, err := newView(inv, gw, audit)
	if err != nil {
		return agentrun.Exit{}, err
	}
	tr, err := inv.OpenTranscript()
	if err != nil {
		return agentrun.Exit{}, err
	}
	defer tr.Close(inv.Stderr)

	res, err := openairt.Run(lctx, openairt.Config{
		BaseURL:      openaiBaseURL,
		Model:        inv.Model,
		SystemPrompt: inv.SystemPrompt,
		Client:       gw.HTTP,
		MaxTurns:     openaiMaxTurns,
		WallTime:     inv.Timeout,
		Transcript:   tr,
	}, viewTools{view: view, audit: audit}, inv.Prompt)
	fmt.Fprintf(inv.Stderr, "agora worker: openai: %d turns, %d prompt and %d completion tokens\n",
		res.Turns, res.PromptTokens, res.CompletionTokens)
	return openaiExit(ctx, res, err, audit.failed(), inv)
}

// openaiExit maps how the loop ended to the agent's exit.
func openaiExit(ctx context.Context, res openairt.Result, err, auditErr error, inv agentrun.Invocation) (agentrun.Exit, error) {
	switch {
	case auditErr != nil:
		return agentrun.Exit{ExitCode: 1, Failure: fmt.Sprintf("tool call not audited, the loop was stopped: %v", auditErr)}, nil
	case err != nil && ctx.Err() != nil:
		return agentrun.Exit{ExitCode: 1, Failure: "model loop cancelled"}, nil
	case err != nil:
		return agentrun.Exit{ExitCode: 1, Failure: fmt.Sprintf("model loop: %v", err)}, nil
	case res.Stopped == openairt.StoppedWallTime:
		return agentrun.Exit{ExitCode: 1, TimedOut: true,
			Failure: fmt.Sprintf("model loop stopped at its wall-time budget of %s after %d turns", inv.Timeout, res.Turns)}, nil
	case res.Stopped != "":
		return agentrun.Exit{ExitCode: 1, Failure: fmt.Sprintf("model loop stopped: %s budget spent after %d turns", res.Stopped, res.Turns)}, nil
	case res.NeedsInput != "":
		return agentrun.Exit{Question: res.NeedsInput}, nil
	}
	final := res.Final
	fmt.Fprintln(inv.Stdout, final)
	return agentrun.Exit{Final: &final}, nil
}
