package modelgw

import (
	"context"
	"sync"
	"time"
)

// Tracer receives the gateway's spans once each has ended (package tracing implements it
// through the dispatcher; the gateway links no OpenTelemetry). parent is a context an earlier
// Span returned, or nil for the dispatch's current phase; kv alternate keys and values.
// Span returns the new span's context. It must not block.
type Tracer interface {
	Span(parent context.Context, name string, start, end time.Time, errText string, kv ...any) context.Context
	// Current is the context a span starting now falls under (the dispatch's current
	// phase): a model call's span is recorded when it ends, by when the phase may have moved
	// on (the agent exits as soon as its last answer arrives), so its parent is taken as it starts.
	Current() context.Context
}

// Span names and the GenAI semantic conventions' operation names.
const (
	spanOpChat = "chat"
	spanOpTool = "execute_tool"
)

// parent is the context a model call starting now is recorded under; nil without a tracer.
func (s *spans) parent() context.Context {
	if s == nil {
		return nil
	}
	return s.t.Current()
}

// spans turns requests into spans: a model call as a GenAI "chat" span under the dispatch's
// phase, and a tool decision as an "execute_tool" span under the model call before it (the
// one whose answer asked for the tool). Attributes are the route, the decision, the model
// name the response reported, token counts, the tool's name and the decision's reason, as
// the audit log records them (masked): never a body, a header, a query or the key.
type spans struct {
	t         Tracer
	mu        sync.Mutex
	lastModel context.Context // the latest model call's span
}

func newSpans(t Tracer) *spans {
	if t == nil {
		return nil
	}
	return &spans{t: t}
}

// providers names each API as gen_ai.provider.name does.
var providers = map[string]string{APIOpenAI: "openai", APIAnthropic: "anthropic"}

// request records a model call's span; other routes have none (a tool decision is
// recorded by tool, the route's request itself is not a span of its own).
func (s *spans) request(g *Gateway, ex *exchange, status int, start time.Time) {
	if s == nil {
		return
	}
	switch ex.route {
	case routeModelChat, routeModelResponses, routeAnthropicMessages:
	default:
		return
	}
	model := g.mask(ex.model, maxModelInAudit)
	name := spanOpChat
	if model != "" {
		name += " " + model
	}
	kv := []any{
		"gen_ai.operation.name", spanOpChat, "gen_ai.provider.name", providers[g.api], "gen_ai.system", providers[g.api],
		"gen_ai.request.model", model, "gen_ai.response.model", model,
		"agora.route", ex.route, "agora.decision", ex.decision, "http.response.status_code", status,
	}
	if u := ex.usage; u != nil {
		kv = append(kv, "gen_ai.usage.input_tokens", u.InputTokens, "gen_ai.usage.output_tokens", u.OutputTokens)
	}
	errText := ""
	if ex.decision != decisionAllowed || status >= 400 {
		errText = ex.decision
		kv = append(kv, "agora.reason", g.mask(ex.reason, maxReasonLen))
	}
	ctx := s.t.Span(ex.spanParent, name, start, time.Now(), errText, kv...)
	s.mu.Lock()
	s.lastModel = ctx
	s.mu.Unlock()
}

// tool records a tool decision the worker reported, as long as it says it took. reason is
// the decision's reason, redacted.
func (s *spans) tool(t *toolAuditRequest, reason string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	parent := s.lastModel
	s.mu.Unlock()
	end := time.Now()
	start := end.Add(-time.Duration(max(t.DurationMS, 0)) * time.Millisecond)
	errText := ""
	if t.Decision == decisionDenied || t.Decision == decisionError {
		errText = t.Decision
	}
	s.t.Span(parent, spanOpTool+" "+t.Tool, start, end, errText,
		"gen_ai.operation.name", spanOpTool, "gen_ai.tool.name", t.Tool, "gen_ai.tool.call.id", t.CallID,
		"agora.tool.decision", t.Decision, "agora.tool.reason", clipReason(reason), "agora.tool.phase", t.Phase)
}

// clipReason caps a reason as the audit record's is capped.
func clipReason(s string) string {
	if len(s) > maxReasonLen {
		return s[:maxReasonLen]
	}
	return s
}
