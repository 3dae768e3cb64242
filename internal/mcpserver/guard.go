package mcpserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/time/rate"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/jcs"
)

// Decisions recorded in the audit log.
const (
	decisionAllowed = "allowed"
	decisionDenied  = "denied"
	decisionInvalid = "invalid"
	decisionUnknown = "unknown-tool"
)

// guard is the single path of every tool call: identify the caller, check its ceiling (again:
// tools/list is only a view), rate-limit, decode the arguments, write the audit entry, and only
// then run the tool. A call whose audit entry cannot be written does not run.
func (s *Server) guard(t tool, id identity, limiter *rate.Limiter) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		start := time.Now()
		raw := rawArguments(req)
		p, ok := id(req)
		if !ok {
			s.audit(ctx, Principal{Client: "unidentified"}, t, entry.MCPToolDenied, decisionDenied, raw)
			return toolError(t.name + " refused: the caller is not identified"), nil
		}
		if !p.Ceiling.Allows(t.tier) {
			s.audit(ctx, p, t, entry.MCPToolDenied, decisionDenied, raw)
			s.log.Warn("tool denied", "tool", t.name, "client", p.Client, "ceiling", p.Ceiling.String())
			return toolError(fmt.Sprintf("client %q may not call %s: its ceiling is %s, and %s needs %s",
				p.Client, t.name, p.Ceiling, t.name, t.tier)), nil
		}
		if limiter != nil && !limiter.Allow() {
			s.log.Warn("tool rate limited", "tool", t.name, "client", p.Client)
			return toolError(t.name + " refused: too many calls; retry in a second"), nil
		}
		args, err := t.decode(raw)
		if err == nil {
			err = s.learnDenied(ctx, args) // refused for what it would start, before it is admitted
		}
		if err == nil {
			err = s.pinDenied(ctx, args) // a version people superseded or retired starts nothing
		}
		var denied *DeniedError
		if errors.As(err, &denied) {
			// Refused for what it asks (a plan with learn): audited as denied before the answer.
			s.audit(ctx, p, t, entry.MCPToolDenied, decisionDenied, raw)
			s.log.Warn("tool denied", "tool", t.name, "client", p.Client, "why", "what its arguments ask")
			return toolError(s.scrub(t.name + " refused: " + denied.Msg)), nil
		}
		if err != nil {
			s.audit(ctx, p, t, entry.MCPToolCall, decisionInvalid, raw)
			return toolError(s.publicError(t.name, err)), nil
		}
		if err := s.audit(ctx, p, t, entry.MCPToolCall, decisionAllowed, raw); err != nil {
			return toolError(t.name + " refused: the audit log could not record this call"), nil
		}
		ctx, release := untilRequestEnds(ctx) // a dropped HTTP connection ends the call
		defer release()
		out, err := t.run(withProgress(ctx, req), s, p, args)
		if err != nil {
			msg := s.publicError(t.name, err)
			s.log.Info("tool call failed", "tool", t.name, "client", p.Client, "ms", time.Since(start).Milliseconds())
			return toolError(msg), nil
		}
		res, err := s.success(out)
		if err != nil {
			return toolError(s.publicError(t.name, err)), nil
		}
		// The audit log records every call; the operator's log needs only the unusual ones.
		s.log.Debug("tool call", "tool", t.name, "client", p.Client, "ms", time.Since(start).Milliseconds())
		return res, nil
	}
}

// audit writes one entry for a call; its error is logged and returned.
func (s *Server) audit(ctx context.Context, p Principal, t tool, kind, decision string, raw json.RawMessage) error {
	sum, form := argsHash(raw)
	err := s.cfg.Audit(ctx, AuditEntry{
		Actor:   p.Client,
		Kind:    kind,
		Subject: entry.MCPTool(t.name),
		Details: map[string]any{
			entry.KeyTool: t.name, entry.KeyDecision: decision, "ceiling": p.Ceiling.String(),
			"args_sha256": sum, "args_form": form,
		},
	})
	if err != nil {
		s.log.Error("audit tool call", "tool", t.name, "client", p.Client, "err", s.scrub(err.Error()))
	}
	return err
}

// rawArguments returns the call's arguments as the client sent them.
func rawArguments(req *mcp.CallToolRequest) json.RawMessage {
	if req == nil || req.Params == nil {
		return nil
	}
	return req.Params.Arguments
}

// argsHash returns the SHA-256 of the arguments' RFC 8785 canonical form ("jcs"), so equal
// arguments hash equal however they were spelled; arguments that have none (not JSON, or
// numbers canonical JSON cannot carry exactly) are hashed as sent ("raw").
func argsHash(raw json.RawMessage) (string, string) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		raw = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err == nil && !dec.More() {
		if b, err := jcs.Marshal(v); err == nil {
			sum := sha256.Sum256(b)
			return hex.EncodeToString(sum[:]), "jcs"
		}
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:]), "raw"
}

// success packs a tool's output as structured content plus the same JSON as text, for clients
// that read only text. Tokens are masked in it as a backstop.
func (s *Server) success(out any) (*mcp.CallToolResult, error) {
	b, err := s.encode(out)
	if err != nil {
		return nil, err
	}
	return &mcp.CallToolResult{
		StructuredContent: json.RawMessage(b),
		Content:           []mcp.Content{&mcp.TextContent{Text: string(b)}},
	}, nil
}

// encode is out as it is sent: JSON, with the tokens masked and every hidden character in its
// strings escaped (escapeHiddenJSON: what an agent wrote cannot reorder or hide what a client
// shows). An [encoded] output is that already.
func (s *Server) encode(out any) ([]byte, error) {
	if e, ok := out.(encoded); ok {
		return e, nil
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encode tool output: %w", err)
	}
	if !s.redactor.Empty() {
		b = s.redactor.Bytes(b)
	}
	return escapeHiddenJSON(b), nil
}

// encoded is a tool output already encoded by [Server.encode].
type encoded []byte

func toolError(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}
