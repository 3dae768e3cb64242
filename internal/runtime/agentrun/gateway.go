//go:build !agora_worker_exec

package agentrun

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/agora-dev/agora/internal/toolreg"
	"github.com/agora-dev/agora/internal/worker/wire"
)

const (
	// GatewayBase is the URL base of requests to the gateway: the host is ignored, every
	// connection dials the socket.
	GatewayBase = "http://gateway"
	// maxGatewayReply caps a /fetch or error reply (the gateway's 8 MiB body cap, in base64).
	maxGatewayReply = 12 << 20
	// fetchTimeout bounds one /fetch exchange; the gateway's own bound is 60 seconds.
	fetchTimeout = 90 * time.Second
	// auditTimeout bounds the report of one tool decision, retries included.
	auditTimeout = 15 * time.Second
	// maxUnavailable is how many 503 answers a tool report takes before it fails.
	maxUnavailable = 3
	// MaxAuditReason is the gateway's limit on a reported reason.
	MaxAuditReason = 512
	// ReasonGatewayRefused is the audit reason of an http_fetch the gateway refused.
	ReasonGatewayRefused = "refused by the gateway"
)

// Gateway talks to the host-side gateway over its Unix socket.
type Gateway struct {
	HTTP *http.Client
	// key is the worker's key, sent with audit reports (workerkey.go); "" for none.
	key string
}

// DialGateway returns a client of the gateway whose socket is at path.
func DialGateway(path string) *Gateway {
	return NewGatewayClient(func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	})
}

// Gateway returns the invocation's client of the gateway. In a pod (remote mode) the
// socket file lives in a volume the worker had to create it in, which the agent (same uid)
// could replace with a listener of its own; the worker's own calls (model, tool audit) then
// go through the network gateway in-process, never through that file.
func (inv Invocation) Gateway() *Gateway {
	if inv.DialHost != nil {
		return NewGatewayClient(func(ctx context.Context) (net.Conn, error) { return inv.DialHost(ctx, wire.GatewaySocket) }).WithKey(inv.WorkerKey)
	}
	return DialGateway(inv.GatewaySocket).WithKey(inv.WorkerKey)
}

// NewGatewayClient returns a client of the gateway that reaches it through dial.
func NewGatewayClient(dial func(context.Context) (net.Conn, error)) *Gateway {
	tr := &http.Transport{
		DialContext:        func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) },
		DisableCompression: true,
		MaxIdleConns:       4,
		// Below the gateway's own 5 s idle timeout, so a request is never sent on a
		// connection the gateway is closing.
		IdleConnTimeout: 2 * time.Second,
	}
	return &Gateway{HTTP: &http.Client{Transport: tr}}
}

// Close closes the client's idle connections.
func (g *Gateway) Close() { g.HTTP.CloseIdleConnections() }

// post sends body to the gateway's path and returns the status and the capped reply.
func (g *Gateway) Post(ctx context.Context, path string, body any) (int, []byte, error) {
	return g.PostVia(ctx, path, body, "")
}

// PostVia is post with the worker's key, and via ("" or ViaHook) saying whose report the
// worker relays.
func (g *Gateway) PostVia(ctx context.Context, path string, body any, via string) (int, []byte, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, GatewayBase+path, bytes.NewReader(b))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if path == "/audit/tool" || path == "/audit/file" {
		g.keyHeaders(req, via) // only where it proves something: never on /fetch or a model call
	}
	resp, err := g.HTTP.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	reply, err := io.ReadAll(io.LimitReader(resp.Body, maxGatewayReply+1))
	if err != nil {
		return resp.StatusCode, nil, err
	}
	if len(reply) > maxGatewayReply {
		return resp.StatusCode, nil, fmt.Errorf("gateway reply over %d bytes", maxGatewayReply)
	}
	return resp.StatusCode, reply, nil
}

// GatewayError is the message of a {"error": "..."} reply, or the status text.
func GatewayError(status int, reply []byte) string {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(reply, &e) == nil && e.Error != "" {
		return OneLine(e.Error, MaxAuditReason)
	}
	return strconv.Itoa(status) + " " + http.StatusText(status)
}

// fetch is http_fetch's [builtin.FetchFunc]: the gateway fetches, through the egress dialer,
// and refuses what is not granted; its refusal becomes a [*toolreg.DeniedError].
func (g *Gateway) Fetch(ctx context.Context, rawURL, method string) (int, string, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	status, reply, err := g.Post(ctx, "/fetch", map[string]string{"url": rawURL, "method": method})
	if err != nil {
		return 0, "", nil, errors.New("the gateway did not answer")
	}
	switch status {
	case http.StatusOK:
	case http.StatusForbidden:
		return 0, "", nil, &toolreg.DeniedError{Tool: "http_fetch", Reason: ReasonGatewayRefused, Hint: GatewayError(status, reply)}
	default:
		return 0, "", nil, errors.New("gateway: " + GatewayError(status, reply))
	}
	var r struct {
		Status      int    `json:"status"`
		ContentType string `json:"content_type"`
		BodyBase64  string `json:"body_base64"`
		Truncated   bool   `json:"truncated"`
	}
	if err := json.Unmarshal(reply, &r); err != nil {
		return 0, "", nil, errors.New("gateway: malformed fetch reply")
	}
	body, err := base64.StdEncoding.DecodeString(r.BodyBase64)
	if err != nil {
		return 0, "", nil, errors.New("gateway: malformed fetch body")
	}
	if r.Truncated {
		body = append(body, "\n[the gateway truncated the body]"...)
	}
	return r.Status, r.ContentType, body, nil
}

// ReportTool sends one decision of the tool view to the gateway's /audit/tool (see report).
func (g *Gateway) ReportTool(ctx context.Context, d toolreg.Decision) error {
	return g.Report(ctx, ToolReport{Tool: d.Tool, Decision: d.Decision, Reason: d.Reason, ArgsHash: d.ArgsHash, Duration: d.Duration})
}

// Phases of a call reported by Claude Code's hooks (claudeadapter, hook.go); the gateway accepts
// DecisionRequested only with PhasePre.
const (
	PhasePre          = "pre"
	PhasePost         = "post"
	DecisionRequested = "requested"
	// DecisionWouldDeny is a learn dispatch's report of a call its grant would refuse, made
	// before the call's own pre report; the gateway accepts it only from a learn dispatch.
	DecisionWouldDeny = "would_deny"
)

// ToolReport is one report to /audit/tool: a decision, or one phase of a call.
type ToolReport struct {
	Tool, Decision, Reason string
	ArgsHash               string // "sha256:<hex>" of the redacted arguments
	Duration               time.Duration
	// Phase is "" (a decision made once), PhasePre or PhasePost; CallID is the runtime's
	// id of the call, required with a phase.
	Phase, CallID string
	// Command is a would_deny's command line ("" otherwise).
	Command string
	// Via is ViaHook for a report the worker relays from claude's hook ("" for its own).
	Via string
}

// report sends r to the gateway's /audit/tool, retrying while the gateway sheds load (429)
// for at most auditTimeout, and a 503 (closing, too busy, or the record not kept) a few
// times. A nil error means the report is on record.
func (g *Gateway) Report(ctx context.Context, r ToolReport) error {
	body := map[string]any{
		"tool":        AuditToolName(r.Tool),
		"decision":    r.Decision,
		"reason":      OneLine(r.Reason, MaxAuditReason),
		"args_hash":   r.ArgsHash,
		"duration_ms": max(r.Duration.Milliseconds(), 0),
	}
	if r.Phase != "" {
		body["phase"] = r.Phase
	}
	if r.CallID != "" {
		body["call_id"] = r.CallID
	}
	if r.Command != "" {
		body["command"] = r.Command
	}
	return g.Record(ctx, "/audit/tool", body, r.Via, "report tool decision")
}

// record posts body to an audit route of the gateway, retrying while the gateway sheds load
// (429) for at most auditTimeout, and a 503 a few times. A nil error means it is on record.
func (g *Gateway) Record(ctx context.Context, path string, body any, via, what string) error {
	ctx, cancel := context.WithTimeout(ctx, auditTimeout)
	defer cancel()
	unavailable := 0
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		status, reply, err := g.PostVia(ctx, path, body, via)
		if err == nil && status == http.StatusServiceUnavailable {
			unavailable++
		}
		switch {
		case err == nil && status == http.StatusNoContent:
			return nil
		case err == nil && status != http.StatusTooManyRequests && (status != http.StatusServiceUnavailable || unavailable >= maxUnavailable):
			return fmt.Errorf("%s: gateway answered %s", what, GatewayError(status, reply))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			return fmt.Errorf("%s: gateway answered %s until the deadline", what, GatewayError(status, reply))
		case <-t.C:
		}
	}
}

// AuditToolName returns name when the gateway accepts it as a tool name (a letter, then
// letters, digits, '_', '.', '-'), and a fixed placeholder otherwise: the view refuses
// invalid names and records them cut, and the reason already says the name was invalid.
func AuditToolName(name string) string {
	if name == "" || len(name) > 128 {
		return "invalid_tool_name"
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if i == 0 && !letter || !letter && !(c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return "invalid_tool_name"
		}
	}
	return name
}

// OneLine replaces control characters with spaces and cuts s to at most n bytes of valid
// UTF-8.
func OneLine(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
	return Truncate(s, n)
}

// FileReport is one report to /audit/file: a learn dispatch's write outside the workspace
// (docs/learn.md), made before the write goes to the scratch directory.
type FileReport struct {
	Tool, Path, Op, Reason string
	CallID                 string // the runtime's id of the call, "" when it has none
	Via                    string // ViaHook for a report the worker relays from claude's hook
}

// ReportFile sends r to the gateway's /audit/file with the worker's key (see record). A nil
// error means it is on record as file.would_deny.
func (g *Gateway) ReportFile(ctx context.Context, r FileReport) error {
	body := map[string]any{
		"tool":   AuditToolName(r.Tool),
		"path":   r.Path,
		"op":     r.Op,
		"reason": OneLine(r.Reason, MaxAuditReason),
	}
	if r.CallID != "" {
		body["call_id"] = r.CallID
	}
	return g.Record(ctx, "/audit/file", body, r.Via, "report file.would_deny")
}
