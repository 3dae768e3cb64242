package claudeadapter

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/runtime/agentrun"
)

// Claude Code's calls a capability marks for approval are held in its PreToolUse hook: the
// hook asks the gateway's /approval (through the worker's relay) and blocks until a person
// decides, then lets the call go on (exit 0) or refuses it with the reason (exit 2, which
// claude gives the model). claude gives the hook its settings' timeout, which the worker
// sets above the target's approval_timeout, so claude never lets a held call through on a
// hook timeout.

// Reasons of claude-code calls held for approval.
const (
	reasonApprovalUnavailable = "claude-code: approval could not be requested; the call is refused"
)

// heldBy returns the approve rule that holds a claude call of tool with input: the host's
// own judgement ([grant.ApprovalTool], [grant.NeedsApproval], [grant.HeldCommandLine]), which
// the gateway repeats before it asks anybody, so the two agree. A Bash line is read from
// the input exactly (bashCommand); an input that cannot be read so is an error, and the call
// is refused.
func heldBy(rules []grant.ApproveRule, tool string, input json.RawMessage) (grant.ApproveRule, bool, error) {
	name := grant.ApprovalTool(tool)
	if name == "" || len(rules) == 0 {
		return grant.ApproveRule{}, false, nil
	}
	if name != "run_command" {
		r, held := grant.NeedsApproval(rules, name, nil)
		return r, held, nil
	}
	line, err := bashCommand(input)
	if err != nil {
		return grant.ApproveRule{}, false, err
	}
	r, held := grant.HeldCommandLine(rules, line)
	return r, held, nil
}

// hold asks for approval of a held PreToolUse call and says whether it may go on; r is the
// call's pre report, which it fills with the refusal when it may not.
func (h hook) hold(ctx context.Context, in hookInput, rule grant.ApproveRule, r *agentrun.ToolReport, stderr io.Writer) bool {
	args := in.Input
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	a, err := h.gw.Approval(ctx, agentrun.AuditToolName(in.Tool), r.CallID, rule.String(), args)
	if err != nil {
		r.Decision, r.Reason = "denied", reasonApprovalUnavailable
		fmt.Fprintf(stderr, "agora: this call needs a person's approval, which could not be asked for (%v); the call is refused\n", err)
		return false
	}
	if a.State == "approved" {
		return true
	}
	r.Decision, r.Reason = "denied", "claude-code: approval "+a.State+" by "+a.Actor+" ("+a.ArgsDigest+")"
	fmt.Fprintf(stderr, "agora: approval %s by %s: %s\n", a.State, a.Actor, h.red.String(a.Reason))
	return false
}

// approveArgs is the hook's --approve flags: each rule as its JSON.
func approveArgs(rules []grant.ApproveRule) []string {
	var out []string
	for _, r := range rules {
		b, _ := json.Marshal(r)
		out = append(out, "--approve="+string(b))
	}
	return out
}

// parseApprove reads the --approve flags back.
func parseApprove(flags []string) ([]grant.ApproveRule, error) {
	var out []grant.ApproveRule
	for _, f := range flags {
		var r grant.ApproveRule
		if err := json.Unmarshal([]byte(f), &r); err != nil {
			return nil, fmt.Errorf("--approve: %w", err)
		}
		out = append(out, r)
	}
	return out, nil
}
