package gateway

import (
	"context"
	"fmt"
	"net/http"
)

// maxToolAuditRequest caps a /audit/tool request body.
const maxToolAuditRequest = 4 << 10

// toolAuditRequest is the body of POST /audit/tool: one decision of the worker's tool view.
type toolAuditRequest struct {
	Tool       string `json:"tool"`
	Decision   string `json:"decision"`
	Reason     string `json:"reason"`
	ArgsHash   string `json:"args_hash"`
	DurationMS int64  `json:"duration_ms"`
}

// validate checks every field; messages name the field and never repeat its value.
func (t *toolAuditRequest) validate() error {
	if err := checkToolName(t.Tool); err != nil {
		return fmt.Errorf("tool: %s", err)
	}
	switch t.Decision {
	case decisionAllowed, decisionDenied, decisionError:
	default:
		return fmt.Errorf("decision: want %s, %s or %s", decisionAllowed, decisionDenied, decisionError)
	}
	if err := checkReason(t.Reason); err != nil {
		return fmt.Errorf("reason: %s", err)
	}
	if !isDigest(t.ArgsHash) {
		return fmt.Errorf("args_hash: want sha256:<64 lowercase hex digits>")
	}
	if t.DurationMS < 0 || t.DurationMS > maxDurationMS {
		return fmt.Errorf("duration_ms: want 0 to %d", maxDurationMS)
	}
	return nil
}

// serveToolAudit records a tool decision reported by the worker as KindToolCall. The
// dispatch id and role come from the gateway's config: the sandbox cannot speak for another.
func (g *Gateway) serveToolAudit(w http.ResponseWriter, r *http.Request, ex *exchange) {
	if r.Method != http.MethodPost {
		g.methodNotAllowed(w, ex, http.MethodPost)
		return
	}
	body, ok := g.readBody(w, r, ex, maxToolAuditRequest)
	if !ok {
		return
	}
	var t toolAuditRequest
	if err := decodeFlat(body, []string{"tool", "decision", "reason", "args_hash", "duration_ms"}, &t); err != nil {
		g.refuse(w, ex, http.StatusBadRequest, "tool audit: "+err.Error())
		return
	}
	if err := t.validate(); err != nil {
		g.refuse(w, ex, http.StatusBadRequest, "tool audit: "+err.Error())
		return
	}
	err := g.audit.Record(context.WithoutCancel(r.Context()), KindToolCall, map[string]any{
		"dispatch":    g.dispatchID,
		"role":        g.role,
		"tool":        t.Tool,
		"decision":    t.Decision,
		"reason":      g.red.String(t.Reason),
		"args_hash":   t.ArgsHash,
		"duration_ms": t.DurationMS,
	})
	if err != nil {
		// The worker fails the call closed when its decision is not on record.
		g.fail(w, ex, http.StatusServiceUnavailable, decisionError, "tool audit: the record was not kept")
		return
	}
	ex.decision = decisionAllowed
	w.WriteHeader(http.StatusNoContent)
}
