//go:build !agora_worker_exec

package agentrun

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/agora-dev/agora/internal/toolreg"
)

// ApprovalAnswer is the gateway's 200 answer from /approval.
type ApprovalAnswer struct {
	Decision   string `json:"decision"`
	Reason     string `json:"reason"`
	Actor      string `json:"actor"`
	ArgsDigest string `json:"args_digest"`
}

// approval holds call id of tool with args at the gateway until it is decided. It waits as
// long as the gateway does (the target's approval_timeout, then the call expires) or until
// ctx ends.
func (g *Gateway) Approval(ctx context.Context, tool, id, rule string, args json.RawMessage) (toolreg.Approval, error) {
	status, reply, err := g.Post(ctx, "/approval", map[string]any{"tool": tool, "call_id": id, "rule": rule, "args": args})
	if err != nil {
		return toolreg.Approval{}, errors.New("the gateway did not answer")
	}
	if status != http.StatusOK {
		return toolreg.Approval{}, errors.New("gateway: " + GatewayError(status, reply))
	}
	var ans ApprovalAnswer
	if err := json.Unmarshal(reply, &ans); err != nil || ans.Decision == "" {
		return toolreg.Approval{}, errors.New("gateway: malformed approval answer")
	}
	return toolreg.Approval{State: ans.Decision, Reason: ans.Reason, Actor: ans.Actor, ArgsDigest: ans.ArgsDigest}, nil
}
