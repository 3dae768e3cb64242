package toolreg

import (
	"context"
	"encoding/json"

	"github.com/agora-dev/agora/internal/grant"
)

// Reasons of calls held for approval ([grant.ApproveRule]).
const (
	// ReasonApprovalUnavailable: the call needs approval and the view has no [Approver]
	// (fail closed: it is refused, never run unheld).
	ReasonApprovalUnavailable = "approval required, and nothing can hold the call"
	// ReasonApprovalFailed prefixes a hold that could not be asked for or answered.
	ReasonApprovalFailed = "approval could not be requested"
)

// Approval is how a person (or the clock) decided a held call.
type Approval struct {
	// State is "approved", "denied" or "expired".
	State string
	// Reason is a denial's or an expiry's reason; the model reads it.
	Reason string
	// Actor decided: a person, or "system" for an expiry.
	Actor string
	// ArgsDigest is the digest of the arguments the decision binds to.
	ArgsDigest string
}

// Approver holds a call for a person's approval: Hold blocks until the call is decided or
// expires. An error means no decision could be had; the call is then refused.
type Approver interface {
	Hold(ctx context.Context, tool string, args json.RawMessage, rule grant.ApproveRule) (Approval, error)
}

// WithApprover makes the view hold, through a, every call an approve rule of its grant
// marks. Without it such a call is refused ([ReasonApprovalUnavailable]).
func WithApprover(a Approver) ViewOption {
	return func(v *View) { v.approver = a }
}

// heldBy returns the approve rule that holds a call of tool with args, if one does. A
// run_command argv is held only when the grant allows it: one it does not is refused by the
// tool without asking anybody.
func (v *View) heldBy(tool string, args json.RawMessage) (grant.ApproveRule, bool) {
	if len(v.grants.Approve) == 0 {
		return grant.ApproveRule{}, false
	}
	var argv []string
	if tool == "run_command" {
		var a struct {
			Argv []string `json:"argv"`
		}
		if json.Unmarshal(args, &a) != nil || !grant.CommandAllowed(v.grants.Commands, a.Argv) {
			return grant.ApproveRule{}, false
		}
		argv = a.Argv
	}
	return grant.NeedsApproval(v.grants.Approve, tool, argv)
}

// hold asks for approval of a held call and returns nil when it may run; otherwise it fills
// d with the refusal (the caller records it) and returns the error the model reads.
func (v *View) hold(ctx context.Context, d *Decision, rule grant.ApproveRule, args json.RawMessage) error {
	if v.approver == nil {
		d.Decision, d.Reason = DecisionDenied, ReasonApprovalUnavailable
		return &DeniedError{Tool: d.Tool, Reason: ReasonApprovalUnavailable}
	}
	a, err := v.approver.Hold(ctx, d.Tool, args, rule)
	if err != nil {
		d.Decision, d.Reason = DecisionError, v.redactReason(ReasonApprovalFailed+": "+err.Error())
		return &DeniedError{Tool: d.Tool, Reason: ReasonApprovalFailed, Hint: v.redactReason(err.Error())}
	}
	if a.State == "approved" {
		return nil
	}
	reason := "approval " + a.State + " by " + a.Actor
	d.Decision, d.Reason = DecisionDenied, v.redactReason(reason+" ("+a.ArgsDigest+")")
	return &DeniedError{Tool: d.Tool, Reason: reason, Hint: v.redactReason(a.Reason)}
}
