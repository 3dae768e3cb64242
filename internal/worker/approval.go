package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"

	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/runtime/openairt"
	"github.com/agora-dev/agora/internal/toolreg"
)

// gatewayApprover is the tool view's [toolreg.Approver]: a held call is POSTed to the
// gateway's /approval, which answers once a person decided it on the host (or it expired).
// The gateway computes the digest and the preview a person sees; the worker only says which
// call and which rule.
type gatewayApprover struct {
	gw  *gatewayClient
	seq atomic.Int64 // numbers calls that have no runtime id of their own
}

// approvalAnswer is the gateway's 200 answer from /approval.
type approvalAnswer struct {
	Decision   string `json:"decision"`
	Reason     string `json:"reason"`
	Actor      string `json:"actor"`
	ArgsDigest string `json:"args_digest"`
}

func (a *gatewayApprover) Hold(ctx context.Context, tool string, args json.RawMessage, rule grant.ApproveRule) (toolreg.Approval, error) {
	id := openairt.CallID(ctx)
	if !validCallID(id) {
		id = fmt.Sprintf("call-%d", a.seq.Add(1))
	}
	return a.gw.approval(ctx, tool, id, rule.String(), args)
}

// approval holds call id of tool with args at the gateway until it is decided. It waits as
// long as the gateway does (the target's approval_timeout, then the call expires) or until
// ctx ends.
func (g *gatewayClient) approval(ctx context.Context, tool, id, rule string, args json.RawMessage) (toolreg.Approval, error) {
	status, reply, err := g.post(ctx, "/approval", map[string]any{"tool": tool, "call_id": id, "rule": rule, "args": args})
	if err != nil {
		return toolreg.Approval{}, errors.New("the gateway did not answer")
	}
	if status != http.StatusOK {
		return toolreg.Approval{}, errors.New("gateway: " + gatewayError(status, reply))
	}
	var ans approvalAnswer
	if err := json.Unmarshal(reply, &ans); err != nil || ans.Decision == "" {
		return toolreg.Approval{}, errors.New("gateway: malformed approval answer")
	}
	return toolreg.Approval{State: ans.Decision, Reason: ans.Reason, Actor: ans.Actor, ArgsDigest: ans.ArgsDigest}, nil
}

// validCallID is the gateway's rule for a call id: 1 to 128 letters, digits, '_' or '-'.
func validCallID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
