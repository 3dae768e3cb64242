package modelgw

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"unicode"
	"unicode/utf8"

	"github.com/agora-dev/agora/internal/audit/entry"
)

// maxToolAuditRequest caps a /audit/tool request body.
const maxToolAuditRequest = 4 << 10

// Phases of a reported tool call. A runtime that decides a call in one step (the openai loop,
// through its tool view) reports it once, with no phase. Claude Code decides and runs its own
// tools; its hooks report each call twice, live ([Claude Code hooks]): phasePre before the
// tool runs and before claude's own permission check, and phasePost with the outcome. The
// pre report is what makes a call that ran impossible to erase: a cancel that kills claude
// between the tool and its outcome still leaves it on record.
//
// [Claude Code hooks]: https://code.claude.com/docs/en/hooks
const (
	phasePre  = "pre"
	phasePost = "post"
)

// decisionRequested is the decision of a phasePre report: the call is about to run, subject
// to the runtime's own checks; its phasePost report (or a denial) says how it ended. It is
// valid only with phasePre, so no other report can claim it.
const decisionRequested = "requested"

// DecisionRanOutsideGrant is the decision of an action a runtime started before agora could
// judge it (codex reports a command as it starts it) and that the grant does not allow: it
// ran, or began to, outside the grant. It is valid only without a phase: it is a finding about
// a call, never a refusal ("denied" says the call did not run) nor a call's outcome.
const DecisionRanOutsideGrant = "ran-outside-grant"

// DecisionWouldDeny is the decision of a learn dispatch's report of a call its grant would
// refuse, made before the call runs (docs/learn.md): recorded as entry.ToolWouldDeny, and
// refused (400, not recorded) from any dispatch whose gateway is not a learn dispatch's
// (Config.Learn, the host's decision). Valid without a phase, or with phasePre (a hook's
// report before the call; the call's own phases follow).
const DecisionWouldDeny = "would_deny"

// maxCallIDLen bounds a reported call id.
const maxCallIDLen = 128

// toolAuditRequest is the body of POST /audit/tool: one decision of the worker's tool view,
// or one phase of a call a runtime's hooks report.
type toolAuditRequest struct {
	Tool       string `json:"tool"`
	Decision   string `json:"decision"`
	Reason     string `json:"reason"`
	ArgsHash   string `json:"args_hash"`
	DurationMS int64  `json:"duration_ms"`
	// Phase is "" (a decision reported once), phasePre or phasePost.
	Phase string `json:"phase"`
	// CallID is the runtime's id of the call (Claude Code's tool_use_id), which pairs a
	// call's reports; required with a phase, optional without.
	CallID string `json:"call_id"`
	// Command is a would_deny's command line (a command tool's); "" otherwise, and only
	// with DecisionWouldDeny.
	Command string `json:"command"`
}

// toolAuditFields are the fields a /audit/tool body may have, each at most once.
var toolAuditFields = []string{"tool", "decision", "reason", "args_hash", "duration_ms", "phase", "call_id", "command"}

// validate checks every field; messages name the field and never repeat its value.
func (t *toolAuditRequest) validate() error {
	if err := checkToolName(t.Tool); err != nil {
		return fmt.Errorf("tool: %s", err)
	}
	if t.Decision == DecisionWouldDeny {
		return t.validateWouldDeny()
	}
	if t.Command != "" {
		return fmt.Errorf("command: only with decision %s", DecisionWouldDeny)
	}
	switch t.Phase {
	case "":
		switch t.Decision {
		case decisionAllowed, decisionDenied, decisionError, DecisionRanOutsideGrant:
		default:
			return fmt.Errorf("decision: want %s, %s, %s or %s", decisionAllowed, decisionDenied, decisionError, DecisionRanOutsideGrant)
		}
	case phasePost:
		switch t.Decision {
		case decisionAllowed, decisionDenied, decisionError:
		default:
			return fmt.Errorf("decision: want %s, %s or %s with phase %s", decisionAllowed, decisionDenied, decisionError, phasePost)
		}
	case phasePre:
		// Before the tool runs nothing can have been allowed yet, nor have failed.
		if t.Decision != decisionRequested && t.Decision != decisionDenied {
			return fmt.Errorf("decision: want %s or %s with phase %s", decisionRequested, decisionDenied, phasePre)
		}
	default:
		return fmt.Errorf("phase: want %s, %s or none", phasePre, phasePost)
	}
	if err := checkCallID(t.CallID); err != nil {
		return fmt.Errorf("call_id: %s", err)
	}
	if t.Phase != "" && t.CallID == "" {
		return errors.New("call_id: required with a phase")
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

// validateWouldDeny checks a would_deny report: no phase but pre, no duration (the call has
// not run), a command of at most entry.MaxWouldDenyCommand bytes of valid UTF-8 without
// control characters.
func (t *toolAuditRequest) validateWouldDeny() error {
	if t.Phase != "" && t.Phase != phasePre {
		return fmt.Errorf("phase: want %s or none with decision %s", phasePre, DecisionWouldDeny)
	}
	if err := checkCallID(t.CallID); err != nil {
		return fmt.Errorf("call_id: %s", err)
	}
	if t.Phase != "" && t.CallID == "" {
		return errors.New("call_id: required with a phase")
	}
	if err := checkReason(t.Reason); err != nil {
		return fmt.Errorf("reason: %s", err)
	}
	if !isDigest(t.ArgsHash) {
		return fmt.Errorf("args_hash: want sha256:<64 lowercase hex digits>")
	}
	if t.DurationMS != 0 {
		return fmt.Errorf("duration_ms: want 0 with decision %s (the call has not run)", DecisionWouldDeny)
	}
	if len(t.Command) > entry.MaxWouldDenyCommand {
		return fmt.Errorf("command: over %d bytes", entry.MaxWouldDenyCommand)
	}
	if !utf8.ValidString(t.Command) {
		return errors.New("command: not valid UTF-8")
	}
	for _, r := range t.Command {
		if unicode.IsControl(r) {
			return errors.New("command: holds a control character")
		}
	}
	return nil
}

// checkCallID accepts "" or a call id: at most 128 letters, digits, '_' and '-' (Claude's
// tool_use ids are "toolu_" and base62).
func checkCallID(id string) error {
	if len(id) > maxCallIDLen {
		return fmt.Errorf("over %d bytes", maxCallIDLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return errors.New("only letters, digits, '_' and '-' are allowed")
		}
	}
	return nil
}

// checkNoSecret refuses a report whose verbatim fields hold a form of the key or of one of
// the dispatch's secrets (the redactor would change them). Those fields are recorded as they
// came, so that an auditor can pair and read them; a tool name or call id drawn from a
// token's own alphabet would otherwise carry a secret into the append-only audit log, where
// it could never be scrubbed. The reason is masked instead: it is free text.
func (g *Gateway) checkNoSecret(t *toolAuditRequest) error {
	for _, f := range []struct{ name, v string }{
		{"tool", t.Tool}, {"call_id", t.CallID}, {"phase", t.Phase},
		{"decision", t.Decision}, {"args_hash", t.ArgsHash},
	} {
		if g.red.String(f.v) != f.v {
			return fmt.Errorf("%s: holds a secret of this dispatch; the report is refused, not recorded", f.name)
		}
	}
	return nil
}

// serveToolAudit records a tool decision reported by the worker as entry.ToolCall. The
// dispatch id and role come from the gateway's config: the sandbox cannot speak for another.
// A report with a call id must also fit what is on record for that call (see callStates).
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
	if err := decodeFlat(body, toolAuditFields, &t); err != nil {
		g.refuse(w, ex, http.StatusBadRequest, "tool audit: "+err.Error())
		return
	}
	if err := t.validate(); err != nil {
		g.refuse(w, ex, http.StatusBadRequest, "tool audit: "+err.Error())
		return
	}
	if err := g.checkNoSecret(&t); err != nil {
		g.refuse(w, ex, http.StatusBadRequest, "tool audit: "+err.Error())
		return
	}
	if t.Decision == DecisionWouldDeny {
		g.serveWouldDeny(w, r, ex, &t)
		return
	}
	next, err := g.calls.begin(t.Phase, t.Decision, t.CallID)
	if err != nil {
		g.refuse(w, ex, http.StatusBadRequest, "tool audit: "+err.Error())
		return
	}
	details := map[string]any{
		"dispatch":          g.dispatchID,
		"role":              g.role,
		entry.KeyTool:       t.Tool,
		entry.KeyDecision:   t.Decision,
		entry.KeyReason:     g.red.String(t.Reason),
		"args_hash":         t.ArgsHash,
		entry.KeyDurationMS: t.DurationMS,
	}
	// Only when given, so a report without them is recorded exactly as before they existed.
	if t.Phase != "" {
		details[entry.KeyPhase] = t.Phase
	}
	if t.CallID != "" {
		details["call_id"] = t.CallID // checked above to hold no secret
	}
	err = g.audit.Record(context.WithoutCancel(r.Context()), entry.ToolCall, details)
	g.tracer.tool(&t, g.red.String(t.Reason))
	g.calls.end(t.CallID, next, err == nil)
	if err != nil {
		// The worker fails the call closed when its decision is not on record.
		g.fail(w, ex, http.StatusServiceUnavailable, decisionError, "tool audit: the record was not kept")
		return
	}
	ex.decision = decisionAllowed
	w.WriteHeader(http.StatusNoContent)
}

// serveWouldDeny records a learn dispatch's would_deny as entry.ToolWouldDeny, before the
// call runs (the worker runs it only on 204). A gateway that is not a learn dispatch's
// refuses it unrecorded: the sandbox cannot make itself a learn dispatch.
func (g *Gateway) serveWouldDeny(w http.ResponseWriter, r *http.Request, ex *exchange, t *toolAuditRequest) {
	if !g.learn {
		g.refuse(w, ex, http.StatusBadRequest, "tool audit: decision "+DecisionWouldDeny+": this dispatch is not a learn dispatch; a call its grant refuses is refused")
		return
	}
	details := map[string]any{
		"dispatch":      g.dispatchID,
		entry.KeyRole:   g.role,
		entry.KeyTool:   t.Tool,
		entry.KeyReason: g.red.String(t.Reason),
		"args_hash":     t.ArgsHash,
		// Who could have sent it (workerkey.go): suggest proposes only from the worker's.
		entry.KeyReporter: g.worker.reporter(r),
	}
	if t.Command != "" {
		details[entry.KeyCommand] = g.red.String(t.Command)
	}
	if t.Phase != "" {
		details[entry.KeyPhase] = t.Phase
	}
	if t.CallID != "" {
		details["call_id"] = t.CallID // checked to hold no secret
	}
	if err := g.audit.Record(context.WithoutCancel(r.Context()), entry.ToolWouldDeny, details); err != nil {
		g.fail(w, ex, http.StatusServiceUnavailable, decisionError, "tool audit: the record was not kept")
		return
	}
	ex.decision = decisionAllowed
	w.WriteHeader(http.StatusNoContent)
}
