package orch

import (
	"context"
	"encoding/json"
	"github.com/agora-dev/agora/internal/budget"
	"time"

	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/verdict"
)

// Attempt is one try of a task: exactly one dispatch.
type Attempt struct {
	DispatchID string // chosen by the engine before the attempt is durable
	RunID      string
	RunName    string
	TaskID     string
	Number     int // 1 for the first attempt
	Subagent   string
	Env        []string
	Target     string
	Input      json.RawMessage
	Timeout    time.Duration // 0 = the target's
	Repo       string
	Revision   string
	Workspace  string // name@sha256:HEX; set, it names the repository and Repo is ""
	Inputs     []Input
	Grants     *grant.Set // the task's narrowing of its subagent's grant, or nil
	// Budget is the task's narrowing of the dispatch's budget; Ceilings hold what is left of
	// the run's budget when the attempt fires (empty when the plan sets none).
	Budget   budget.Budget
	Ceilings []budget.Ceiling
	// ParentID and Answer are set when the attempt answers a dispatch that needed input.
	ParentID string
	Answer   string
	Actor    string
	// Verify is the task's verify gate (timeout resolved), nil for none: the dispatch runs
	// it after the agent, in a fresh sandbox, and reports its verdict in the Outcome.
	Verify *verdict.Spec
	// Lists are output paths the executor reads, once the attempt succeeded, as fan-out
	// lists ([DecodeItems]) into Outcome.Items; Review asks it to read the reviewer's final
	// answer, as its worker vouched for it ([DecodeFinalReview]), into Outcome.Review. Both
	// are read from the products the host collected, never from a path the sandbox can still
	// change.
	Lists  []string
	Review bool
	// Learn is the task's learn: true (docs/learn.md): the dispatch is a learn dispatch. The
	// service refused the plan if an MCP client submitted it; the executor refuses it again.
	Learn bool
}

// Input is an upstream task's product this attempt receives.
type Input struct {
	Key          string `json:"key"`
	FromTask     string `json:"from_task"`
	FromDispatch string `json:"from_dispatch"`
	Select       string `json:"select"`
	// Dir, when set, mounts the product under /agora/inputs/<key>/<dir>/: the key of the
	// fan-out item it comes from, one of many under one key.
	Dir string `json:"dir,omitempty"`
	// Apply has the patch applied to the workspace before the agent starts: a fix's
	// rejected work, which its own patch then holds too.
	Apply bool `json:"apply,omitempty"`
	// Stack marks one patch of a stacked task's base (plan.StackKey, Dir its task): the
	// dispatch starts from the run's commit with every Stack input's patch applied, in the
	// order of Inputs, as commits, and its own patch is taken against that tree.
	Stack bool `json:"stack,omitempty"`
}

// Outcome is how an attempt ended.
type Outcome struct {
	DispatchID string
	State      string // succeeded, failed, needs_input, cancelled
	Reason     string // the dispatch failure reason
	Detail     string
	Question   string
	// Usage is what the attempt's dispatch used (model calls, tokens, cost); nil: unknown
	// or none.
	Usage *budget.Usage
	// Verdict is the dispatch's verify gate verdict, nil when it had none or never reached
	// it (it failed, asked a question or was cancelled first). A red verdict comes with
	// State failed and Reason [lifecycle.ReasonVerifyFailed].
	Verdict *verdict.Verdict
	// Items holds the fan-out lists of Attempt.Lists, by path, once the attempt succeeded;
	// Review a reviewer's review (nil: none read).
	Items  map[string]ItemList
	Review *Review
}

// Executor starts attempts and reports their ends.
type Executor interface {
	// Start runs a or, when a dispatch with a.DispatchID already exists, attaches to it. It
	// must not block for long, and must call done exactly once with the outcome, from any
	// goroutine, unless ctx ends first (the engine is stopping).
	Start(ctx context.Context, a Attempt, done func(Outcome))
	// Cancel asks the attempt's dispatch to stop; its end still arrives through done.
	Cancel(ctx context.Context, dispatchID string)
}
