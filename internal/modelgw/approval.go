package modelgw

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/agora-dev/agora/internal/jcs"
	"github.com/agora-dev/agora/internal/strictjson"
)

// A call a capability marks for approval (grant.ApproveRule) is held: the worker's tool
// path (the openai runtime's tool view, Claude Code's PreToolUse hook) POSTs it to
// /approval with its arguments and waits for the answer. The gateway computes what a person
// is shown and what the decision binds to itself, never taking the sandbox's word for it:
// the rule that holds the call (held.go), the digest of the canonical arguments, and a
// preview with the dispatch's secrets masked, invisible characters escaped, the fields that
// say what the call acts on first, cut at MaxApprovalPreview bytes (preview.go). The [Approver] (the
// dispatch's supervisor) records the request and blocks until a person decides it from
// another process or it expires; the answer says how, with the reason a denial gives.

// Approval limits.
const (
	// MaxApprovalArgs caps the arguments of a held call; a larger call cannot be held and
	// is refused (the worker denies it).
	MaxApprovalArgs = 1 << 20
	// MaxApprovalPreview caps the preview a person is shown, in bytes.
	MaxApprovalPreview = 2 << 10
	// maxApprovalRule caps the rule named in a request.
	maxApprovalRule = 512
)

// ApprovalRequest is a held call as the gateway computed it.
type ApprovalRequest struct {
	// CallID is the runtime's id of the call; Tool its tool (as the runtime names it); Rule
	// the approve rule of the grant that holds it, as the gateway found it (see holdingRule).
	CallID, Tool, Rule string
	// ArgsDigest is "sha256:<hex>" of the arguments' RFC 8785 canonical JSON: a decision
	// binds to exactly these arguments.
	ArgsDigest string
	// Preview is for a person to read: the arguments with the dispatch's secrets masked,
	// invisible characters escaped, the fields that say what the call acts on first, cut to
	// MaxApprovalPreview bytes with markers that cannot be taken for content (preview.go).
	Preview string
	// Args is the whole arguments, canonical JSON with the dispatch's secrets masked (not
	// escaped: whoever shows it escapes it, see [EscapeJSON]), for a person who wants to read
	// all of them before deciding; ArgsBytes is the size of the canonical arguments.
	Args      string
	ArgsBytes int
}

// ApprovalDecision is how a held call was decided.
type ApprovalDecision struct {
	// State is "approved", "denied" or "expired".
	State string
	// Reason is a denial's or an expiry's reason, for the model to read.
	Reason string
	// Actor is who decided: a person, or "system" for an expiry.
	Actor string
}

// Approver holds a call until it is decided. Await records the request, blocks until a
// person decides it or it expires (ctx ending expires it too), and returns the decision. An
// error means the request could not be recorded or read back: the call is refused.
type Approver interface {
	Await(ctx context.Context, req ApprovalRequest) (ApprovalDecision, error)
}

// approvalRequest is the body of POST /approval.
type approvalRequest struct {
	Tool   string `json:"tool"`
	CallID string `json:"call_id"`
	// Rule is what the worker says holds the call. It is checked like any field and then
	// ignored: the gateway finds the rule itself, in the grant.
	Rule string          `json:"rule"`
	Args json.RawMessage `json:"args"`
}

// approvalAnswer is the body of a 200 answer from /approval.
type approvalAnswer struct {
	Decision   string `json:"decision"`
	Reason     string `json:"reason,omitempty"`
	Actor      string `json:"actor"`
	ArgsDigest string `json:"args_digest"`
}

// ArgsDigest returns "sha256:<hex>" of args' RFC 8785 canonical form, and that form. args
// must be a JSON object.
func ArgsDigest(args []byte) (string, []byte, error) {
	if err := strictjson.CheckObject(args); err != nil {
		return "", nil, fmt.Errorf("args: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", nil, fmt.Errorf("args: %s", jsonErr(err))
	}
	canon, err := jcs.Marshal(v)
	if err != nil {
		return "", nil, fmt.Errorf("args: %w", err)
	}
	sum := sha256.Sum256(canon)
	return "sha256:" + hex.EncodeToString(sum[:]), canon, nil
}

// serveApproval holds a call until the Approver decides it.
func (g *Gateway) serveApproval(w http.ResponseWriter, r *http.Request, ex *exchange) {
	if r.Method != http.MethodPost {
		g.methodNotAllowed(w, ex, http.MethodPost)
		return
	}
	if g.approver == nil {
		g.refuse(w, ex, http.StatusNotFound, "approval: this dispatch holds no calls for approval")
		return
	}
	body, ok := g.readBody(w, r, ex, MaxApprovalArgs+4<<10)
	if !ok {
		return
	}
	var req approvalRequest
	if err := strictjson.Unmarshal(body, &req); err != nil {
		g.refuse(w, ex, http.StatusBadRequest, "approval: "+err.Error())
		return
	}
	if err := g.checkApproval(&req); err != nil {
		g.refuse(w, ex, http.StatusBadRequest, "approval: "+err.Error())
		return
	}
	digest, canon, err := ArgsDigest(req.Args)
	if err != nil {
		g.refuse(w, ex, http.StatusBadRequest, "approval: "+err.Error())
		return
	}
	// Which rule holds the call is the grant's to say, never the request's; a call none
	// holds is refused with its own entry (403 is not counted away), and no person is asked.
	rule, err := g.holdingRule(req.Tool, req.Args)
	if err != nil {
		g.refuse(w, ex, http.StatusForbidden, "approval: "+err.Error())
		return
	}
	// Every held call costs the audit log two entries (request, decision): charge them to
	// the dispatch's audit budget first, so a sandbox cannot flood the log by asking.
	if err := g.audit.charge(2, int64(len(req.Tool)+len(req.CallID)+len(rule.String())+MaxApprovalPreview)*2); err != nil {
		g.fail(w, ex, http.StatusServiceUnavailable, decisionError, "approval: "+err.Error())
		return
	}
	// The client going away (or the gateway closing) ends the wait; the approver expires it.
	dec, err := g.approver.Await(r.Context(), ApprovalRequest{
		CallID: req.CallID, Tool: req.Tool, Rule: rule.String(), ArgsDigest: digest,
		Preview: g.renderPreview(canon, g.dispatchID, req.CallID), Args: g.red.String(string(canon)), ArgsBytes: len(canon),
	})
	if err != nil {
		g.fail(w, ex, http.StatusServiceUnavailable, decisionError, "approval: the request was not recorded: "+err.Error())
		return
	}
	ex.decision = decisionAllowed
	if dec.State != "approved" {
		ex.decision = decisionDenied
	}
	ex.reason = g.mask("approval "+dec.State+" by "+dec.Actor+" for "+req.Tool+" "+digest, maxReasonLen)
	writeJSON(w, http.StatusOK, approvalAnswer{
		Decision: dec.State, Reason: g.red.String(dec.Reason), Actor: dec.Actor, ArgsDigest: digest,
	})
}

// checkApproval checks the request's fields; messages name the field, never its value.
func (g *Gateway) checkApproval(req *approvalRequest) error {
	if err := checkToolName(req.Tool); err != nil {
		return fmt.Errorf("tool: %s", err)
	}
	if req.CallID == "" {
		return errors.New("call_id: required")
	}
	if err := checkCallID(req.CallID); err != nil {
		return fmt.Errorf("call_id: %s", err)
	}
	if len(req.Rule) > maxApprovalRule {
		return fmt.Errorf("rule: over %d bytes", maxApprovalRule)
	}
	if err := checkReason(req.Rule); err != nil {
		return fmt.Errorf("rule: %s", err)
	}
	for _, f := range []struct{ name, v string }{{"tool", req.Tool}, {"call_id", req.CallID}, {"rule", req.Rule}} {
		if g.red.String(f.v) != f.v {
			return fmt.Errorf("%s: holds a secret of this dispatch; the request is refused", f.name)
		}
	}
	if len(req.Args) == 0 {
		return errors.New("args: required")
	}
	if len(req.Args) > MaxApprovalArgs {
		return fmt.Errorf("args: over %d bytes; a call this large cannot be held for approval", MaxApprovalArgs)
	}
	return nil
}
