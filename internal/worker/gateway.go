package worker

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/agora-dev/agora/internal/toolreg"
	"github.com/agora-dev/agora/internal/worker/wire"
)

const (
	// gatewayBase is the URL base of requests to the gateway: the host is ignored, every
	// connection dials the socket.
	gatewayBase = "http://gateway"
	// maxSocketPath is the longest Unix socket path Linux accepts.
	maxSocketPath = 107
	// maxGatewayReply caps a /fetch or error reply (the gateway's 8 MiB body cap, in base64).
	maxGatewayReply = 12 << 20
	// fetchTimeout bounds one /fetch exchange; the gateway's own bound is 60 seconds.
	fetchTimeout = 90 * time.Second
	// auditTimeout bounds the report of one tool decision, retries included.
	auditTimeout = 15 * time.Second
	// maxUnavailable is how many 503 answers a tool report takes before it fails.
	maxUnavailable = 3
	// maxAuditReason is the gateway's limit on a reported reason.
	maxAuditReason = 512
	// ReasonGatewayRefused is the audit reason of an http_fetch the gateway refused.
	ReasonGatewayRefused = "refused by the gateway"
)

// gatewayClient talks to the host-side gateway over its Unix socket.
type gatewayClient struct {
	http *http.Client
	key  string // the worker's key, sent with tool reports (workerkey.go); "" for none
}

// gatewaySocket returns the path of the gateway's socket under root, checked to be a socket.
func gatewaySocket(root string) (string, error) {
	p, err := socketPath(root, wire.GatewaySocket)
	if err != nil {
		return "", fmt.Errorf("gateway: %w", err)
	}
	return p, nil
}

// socketPath returns the path of the host's socket name in the gateway directory under root,
// checked to be a socket. A path too long for a socket address is resolved through its
// directory's symlink (the host links a long stage path to a short directory).
func socketPath(root, name string) (string, error) {
	path := filepath.Join(root, wire.GatewayDir, name)
	if len(path) > maxSocketPath {
		dir, err := filepath.EvalSymlinks(filepath.Dir(path))
		if err != nil {
			return "", err
		}
		path = filepath.Join(dir, name)
		if len(path) > maxSocketPath {
			return "", fmt.Errorf("socket path %q is over the %d byte limit", path, maxSocketPath)
		}
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return "", fmt.Errorf("no socket: %w", err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return "", fmt.Errorf("%s is not a socket", path)
	}
	return path, nil
}

// dialGateway returns a client of the gateway whose socket is at path.
func dialGateway(path string) *gatewayClient {
	return newGatewayClient(func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	})
}

// gatewayClient returns the invocation's client of the gateway. In a pod (remote mode) the
// socket file lives in a volume the worker had to create it in, which the agent (same uid)
// could replace with a listener of its own; the worker's own calls (model, tool audit) then
// go through the network gateway in-process, never through that file.
func (inv invocation) gatewayClient() *gatewayClient {
	if inv.dialHost != nil {
		return newGatewayClient(func(ctx context.Context) (net.Conn, error) { return inv.dialHost(ctx, wire.GatewaySocket) }).withKey(inv.workerKey)
	}
	return dialGateway(inv.gateway).withKey(inv.workerKey)
}

func newGatewayClient(dial func(context.Context) (net.Conn, error)) *gatewayClient {
	tr := &http.Transport{
		DialContext:        func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) },
		DisableCompression: true,
		MaxIdleConns:       4,
		// Below the gateway's own 5 s idle timeout, so a request is never sent on a
		// connection the gateway is closing.
		IdleConnTimeout: 2 * time.Second,
	}
	return &gatewayClient{http: &http.Client{Transport: tr}}
}

func (g *gatewayClient) close() { g.http.CloseIdleConnections() }

// post sends body to the gateway's path and returns the status and the capped reply.
func (g *gatewayClient) post(ctx context.Context, path string, body any) (int, []byte, error) {
	return g.postVia(ctx, path, body, "")
}

// postVia is post with the worker's key, and via ("" or viaHook) saying whose report the
// worker relays.
func (g *gatewayClient) postVia(ctx context.Context, path string, body any, via string) (int, []byte, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, gatewayBase+path, bytes.NewReader(b))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if path == "/audit/tool" || path == "/audit/file" {
		g.keyHeaders(req, via) // only where it proves something: never on /fetch or a model call
	}
	resp, err := g.http.Do(req)
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

// gatewayError is the message of a {"error": "..."} reply, or the status text.
func gatewayError(status int, reply []byte) string {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(reply, &e) == nil && e.Error != "" {
		return oneLine(e.Error, maxAuditReason)
	}
	return strconv.Itoa(status) + " " + http.StatusText(status)
}

// fetch is http_fetch's [builtin.FetchFunc]: the gateway fetches, through the egress dialer,
// and refuses what is not granted; its refusal becomes a [*toolreg.DeniedError].
func (g *gatewayClient) fetch(ctx context.Context, rawURL, method string) (int, string, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	status, reply, err := g.post(ctx, "/fetch", map[string]string{"url": rawURL, "method": method})
	if err != nil {
		return 0, "", nil, errors.New("the gateway did not answer")
	}
	switch status {
	case http.StatusOK:
	case http.StatusForbidden:
		return 0, "", nil, &toolreg.DeniedError{Tool: "http_fetch", Reason: ReasonGatewayRefused, Hint: gatewayError(status, reply)}
	default:
		return 0, "", nil, errors.New("gateway: " + gatewayError(status, reply))
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

// reportTool sends one decision of the tool view to the gateway's /audit/tool (see report).
func (g *gatewayClient) reportTool(ctx context.Context, d toolreg.Decision) error {
	return g.report(ctx, toolReport{Tool: d.Tool, Decision: d.Decision, Reason: d.Reason, ArgsHash: d.ArgsHash, Duration: d.Duration})
}

// Phases of a call reported by Claude Code's hooks (see hook.go); the gateway accepts
// decisionRequested only with phasePre.
const (
	phasePre          = "pre"
	phasePost         = "post"
	decisionRequested = "requested"
	// decisionWouldDeny is a learn dispatch's report of a call its grant would refuse, made
	// before the call's own pre report; the gateway accepts it only from a learn dispatch.
	decisionWouldDeny = "would_deny"
)

// toolReport is one report to /audit/tool: a decision, or one phase of a call.
type toolReport struct {
	Tool, Decision, Reason string
	ArgsHash               string // "sha256:<hex>" of the redacted arguments
	Duration               time.Duration
	// Phase is "" (a decision made once), phasePre or phasePost; CallID is the runtime's
	// id of the call, required with a phase.
	Phase, CallID string
	// Command is a would_deny's command line ("" otherwise).
	Command string
	// Via is viaHook for a report the worker relays from claude's hook ("" for its own).
	Via string
}

// report sends r to the gateway's /audit/tool, retrying while the gateway sheds load (429)
// for at most auditTimeout, and a 503 (closing, too busy, or the record not kept) a few
// times. A nil error means the report is on record.
func (g *gatewayClient) report(ctx context.Context, r toolReport) error {
	body := map[string]any{
		"tool":        auditToolName(r.Tool),
		"decision":    r.Decision,
		"reason":      oneLine(r.Reason, maxAuditReason),
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
	return g.record(ctx, "/audit/tool", body, r.Via, "report tool decision")
}

// record posts body to an audit route of the gateway, retrying while the gateway sheds load
// (429) for at most auditTimeout, and a 503 a few times. A nil error means it is on record.
func (g *gatewayClient) record(ctx context.Context, path string, body any, via, what string) error {
	ctx, cancel := context.WithTimeout(ctx, auditTimeout)
	defer cancel()
	unavailable := 0
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		status, reply, err := g.postVia(ctx, path, body, via)
		if err == nil && status == http.StatusServiceUnavailable {
			unavailable++
		}
		switch {
		case err == nil && status == http.StatusNoContent:
			return nil
		case err == nil && status != http.StatusTooManyRequests && (status != http.StatusServiceUnavailable || unavailable >= maxUnavailable):
			return fmt.Errorf("%s: gateway answered %s", what, gatewayError(status, reply))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			return fmt.Errorf("%s: gateway answered %s until the deadline", what, gatewayError(status, reply))
		case <-t.C:
		}
	}
}

// auditToolName returns name when the gateway accepts it as a tool name (a letter, then
// letters, digits, '_', '.', '-'), and a fixed placeholder otherwise: the view refuses
// invalid names and records them cut, and the reason already says the name was invalid.
func auditToolName(name string) string {
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

// oneLine replaces control characters with spaces and cuts s to at most n bytes of valid
// UTF-8.
func oneLine(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
	return truncate(s, n)
}

// fileReport is one report to /audit/file: a learn dispatch's write outside the workspace
// (docs/learn.md), made before the write goes to the scratch directory.
type fileReport struct {
	Tool, Path, Op, Reason string
	CallID                 string // the runtime's id of the call, "" when it has none
	Via                    string // viaHook for a report the worker relays from claude's hook
}

// reportFile sends r to the gateway's /audit/file with the worker's key (see record). A nil
// error means it is on record as file.would_deny.
func (g *gatewayClient) reportFile(ctx context.Context, r fileReport) error {
	body := map[string]any{
		"tool":   auditToolName(r.Tool),
		"path":   r.Path,
		"op":     r.Op,
		"reason": oneLine(r.Reason, maxAuditReason),
	}
	if r.CallID != "" {
		body["call_id"] = r.CallID
	}
	return g.record(ctx, "/audit/file", body, r.Via, "report file.would_deny")
}
