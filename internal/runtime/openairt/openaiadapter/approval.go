package openaiadapter

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"

	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/runtime/agentrun"
	"github.com/agora-dev/agora/internal/runtime/openairt"
	"github.com/agora-dev/agora/internal/toolreg"
)

// gatewayApprover is the tool view's [toolreg.Approver]: a held call is POSTed to the
// gateway's /approval, which answers once a person decided it on the host (or it expired).
// The gateway computes the digest and the preview a person sees; the worker only says which
// call and which rule.
type gatewayApprover struct {
	gw  *agentrun.Gateway
	seq atomic.Int64 // numbers calls that have no runtime id of their own
}

func (a *gatewayApprover) Hold(ctx context.Context, tool string, args json.RawMessage, rule grant.ApproveRule) (toolreg.Approval, error) {
	id := openairt.CallID(ctx)
	if !validCallID(id) {
		id = fmt.Sprintf("call-%d", a.seq.Add(1))
	}
	return a.gw.Approval(ctx, tool, id, rule.String(), args)
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
