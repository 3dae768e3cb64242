package dispatch

import (
	"context"
	"fmt"
	"time"

	"github.com/agora-dev/agora/internal/modelgw"
)

// approvalPoll is how often a held call's supervisor reads its approval back: a person
// decides it from another process, through agora.db.
const approvalPoll = 200 * time.Millisecond

// approvalWaiter is the dispatch's [modelgw.Approver]: it records a held call, then waits
// for a decision in agora.db until the approval timeout, when it records the expiry itself.
type approvalWaiter struct {
	records  *Records
	id, role string
	timeout  time.Duration
	poll     time.Duration
}

var _ modelgw.Approver = (*approvalWaiter)(nil)

// Await records req as pending and blocks until it is decided, expires, or ctx ends (the
// worker went away or the dispatch is ending: the approval expires). Whoever settles it
// first wins, in one transaction each: a late approve finds it expired, a late expiry finds
// it decided.
func (w *approvalWaiter) Await(ctx context.Context, req modelgw.ApprovalRequest) (modelgw.ApprovalDecision, error) {
	a, err := w.records.RequestApproval(context.WithoutCancel(ctx), w.id, Approval{
		CallID: req.CallID, Tool: req.Tool, ArgsDigest: req.ArgsDigest, Preview: req.Preview, ArgsBytes: req.ArgsBytes,
		Rule: req.Rule, Role: w.role,
	}, req.Args, w.timeout)
	if err != nil {
		return modelgw.ApprovalDecision{}, err
	}
	poll := w.poll
	if poll <= 0 {
		poll = approvalPoll
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	deadline := time.NewTimer(time.Until(a.ExpiresAt))
	defer deadline.Stop()
	for {
		var expire string
		select {
		case <-ctx.Done():
			expire = "the dispatch stopped waiting before anyone decided"
		case <-deadline.C:
			expire = fmt.Sprintf("no decision within the approval timeout (%s)", w.timeout)
		case <-t.C:
		}
		bg := context.WithoutCancel(ctx)
		if expire != "" {
			if err := w.records.ExpireApproval(bg, w.id, a.Seq, expire); err != nil {
				return modelgw.ApprovalDecision{}, err
			}
		}
		cur, err := w.records.Approval(bg, w.id, a.Seq)
		if err != nil {
			return modelgw.ApprovalDecision{}, err
		}
		if cur.State != ApprovalPending {
			return modelgw.ApprovalDecision{State: cur.State, Reason: cur.Reason, Actor: cur.Actor}, nil
		}
	}
}
