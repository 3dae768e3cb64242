package modelgw

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/budget"
)

// Routes as recorded in the audit log.
const (
	routeModelChat = "model.chat_completions"
	// The Responses API (what the Codex CLI speaks), beside chat completions.
	routeModelResponses = "model.responses"
	routeModelModels    = "model.models"
	routeModelOther     = "model.unknown"
	// The Anthropic routes, served when the model API is APIAnthropic.
	routeAnthropicMessages = "anthropic.messages"
	routeAnthropicCount    = "anthropic.count_tokens"
	routeAnthropicOther    = "anthropic.unknown"
	routeFetch             = "fetch"
	routeAuditTool         = "audit.tool"
	routeAuditFile         = "audit.file"
	routeApproval          = "approval"
	routeWorkerClaim       = "worker.claim"
	routeUnknown           = "unknown"
)

// maxPathInAudit caps the upstream path kept in an audit record.
const maxPathInAudit = 256

// maxModelInAudit bounds the model name on a request's record.
const maxModelInAudit = 128

// exchange is what one request's audit record says beyond what the middleware measures.
// Handlers fill it in; the middleware records it once when the handler returns.
type exchange struct {
	route    string
	host     string // upstream host, if any
	path     string // upstream path, if any; never a query string
	decision string
	reason   string
	// usage, when set, is what a model response reported (recorded with the request).
	usage *budget.Usage
	// model and costNano, with usage, are the model the response was priced as and its cost
	// in nano-dollars (0 without a price).
	model    string
	costNano int64
	// responseModel is the model the response named, when it is not model (a dated name).
	responseModel string
	// tally, when set, is the reason a refusal is counted under instead of having its own
	// entry (see auditlimit.go).
	tally string
	// spanParent is what the request's span falls under, taken as it started (trace.go).
	spanParent context.Context
}

// routeOf names the route for path without trusting anything else in the request.
func routeOf(path string) string {
	switch path {
	case "/model/chat/completions":
		return routeModelChat
	case "/model/responses":
		return routeModelResponses
	case "/model/models":
		return routeModelModels
	case "/fetch":
		return routeFetch
	case "/audit/tool":
		return routeAuditTool
	case "/audit/file":
		return routeAuditFile
	case "/approval":
		return routeApproval
	case "/worker/claim":
		return routeWorkerClaim
	case "/anthropic/v1/messages":
		return routeAnthropicMessages
	case "/anthropic/v1/messages/count_tokens":
		return routeAnthropicCount
	}
	switch {
	case strings.HasPrefix(path, "/model/"):
		return routeModelOther
	case strings.HasPrefix(path, "/anthropic/"):
		return routeAnthropicOther
	}
	return routeUnknown
}

// serve admits a request (open, under the concurrency and rate limits, the audit budget not
// spent), routes it and records it whatever happens, a panic included: as [entry.ToolGateway], or
// counted for [entry.ToolGatewayRefused]. The record is written before the handler counts as
// finished, so Close never returns ahead of a record.
func (g *Gateway) serve(w http.ResponseWriter, r *http.Request) {
	if g.audit.spent() {
		// The dispatch is being stopped; an entry per refusal is what the budget prevents.
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "the dispatch's audit budget is spent; it is being stopped"})
		return
	}
	start := time.Now()
	ex := &exchange{route: routeOf(r.URL.Path), decision: decisionDenied, spanParent: g.tracer.parent()}
	rec := &recorder{ResponseWriter: w}
	body := &countingBody{ReadCloser: r.Body}
	r.Body = body
	entered := g.enter()
	if entered {
		defer g.inflight.Done() // runs last, after the record
	}
	defer func() {
		if p := recover(); p != nil {
			// The response was cut off (an aborted stream): record what was sent.
			if ex.decision == decisionAllowed {
				ex.decision = decisionError
			}
			g.record(r, ex, rec.status, rec.bytes, body.n, start)
			panic(p)
		}
		rec.status = cmp.Or(rec.status, http.StatusOK)
		g.record(r, ex, rec.status, rec.bytes, body.n, start)
	}()
	if !entered {
		g.refuse(rec, ex, http.StatusServiceUnavailable, "gateway is closing")
		ex.tally = tallyClosing
		return
	}
	select {
	case g.slots <- struct{}{}:
		defer func() { <-g.slots }()
	default:
		g.refuse(rec, ex, http.StatusServiceUnavailable, fmt.Sprintf("more than %d requests in flight", cap(g.slots)))
		ex.tally = tallyBusy
		return
	}
	if !g.limiter.Allow() {
		rec.Header().Set("Retry-After", "1")
		g.refuse(rec, ex, http.StatusTooManyRequests, "request rate limit exceeded")
		return
	}
	switch ex.route {
	case routeModelChat:
		g.serveModel(rec, r, ex, APIOpenAI, http.MethodPost, "chat/completions", budget.ShapeChat)
	case routeModelResponses:
		g.serveModel(rec, r, ex, APIOpenAI, http.MethodPost, "responses", budget.ShapeResponses)
	case routeModelModels:
		g.serveModel(rec, r, ex, APIOpenAI, http.MethodGet, "models", 0)
	case routeAnthropicMessages:
		g.serveModel(rec, r, ex, APIAnthropic, http.MethodPost, "v1/messages", budget.ShapeAnthropic)
	case routeAnthropicCount:
		g.serveModel(rec, r, ex, APIAnthropic, http.MethodPost, "v1/messages/count_tokens", 0)
	case routeFetch:
		g.serveFetch(rec, r, ex)
	case routeAuditTool:
		g.serveToolAudit(rec, r, ex)
	case routeAuditFile:
		g.serveFileAudit(rec, r, ex)
	case routeApproval:
		g.serveApproval(rec, r, ex)
	case routeWorkerClaim:
		g.serveWorkerClaim(rec, r, ex)
	default:
		g.refuse(rec, ex, http.StatusNotFound, "no such route (want /model/chat/completions, /model/responses, /model/models, /anthropic/v1/messages, /fetch, /audit/tool, /audit/file or /approval)")
	}
}

// enter registers a running handler unless the gateway is closing.
func (g *Gateway) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closing {
		return false
	}
	g.inflight.Add(1)
	return true
}

// record counts a refusal the sandbox can provoke at will (ex.tally set) and writes any other
// request's one entry.ToolGateway record. It holds no body, query string or key. status 0 means no
// response was sent.
func (g *Gateway) record(r *http.Request, ex *exchange, status int, bytesOut, bytesIn int64, start time.Time) {
	if ex.tally != "" {
		g.tally.add(ex.route, ex.tally, status, time.Now())
		return
	}
	g.tracer.request(g, ex, status, start)
	details := map[string]any{
		"dispatch":          g.dispatchID,
		"role":              g.role,
		entry.KeyRoute:      ex.route,
		entry.KeyMethod:     methodName(r.Method),
		entry.KeyHost:       g.mask(ex.host, maxPathInAudit),
		entry.KeyPath:       g.mask(ex.path, maxPathInAudit),
		"status":            status,
		"bytes_in":          bytesIn,
		"bytes_out":         bytesOut,
		entry.KeyDurationMS: time.Since(start).Milliseconds(),
		entry.KeyDecision:   ex.decision,
		entry.KeyReason:     g.mask(ex.reason, maxReasonLen),
	}
	if u := ex.usage; u != nil {
		details[entry.KeyInputTokens], details[entry.KeyOutputTokens], details[entry.KeyCachedTokens] = u.InputTokens, u.OutputTokens, u.CachedTokens
		// The model name comes from upstream's response (or the dispatch's declaration):
		// masked and clipped like every other string the gateway records.
		details[entry.KeyModel], details[entry.KeyCostNanoUSD] = g.mask(ex.model, maxModelInAudit), ex.costNano
		if ex.responseModel != "" {
			details["response_model"] = g.mask(ex.responseModel, maxModelInAudit)
		}
	}
	// The answer is sent; a record that is not kept cannot change it.
	_ = g.audit.Record(context.WithoutCancel(r.Context()), entry.ToolGateway, details)
}

// mask redacts the key from s, then clips it to n bytes: clipping first could cut a key in
// two and leave its first part unmasked. Bytes that are not UTF-8 (a fetch host the sandbox
// percent-encoded as "%ff") become U+FFFD first: the audit writes only valid UTF-8, and a
// record it refused would leave the call unrecorded.
func (g *Gateway) mask(s string, n int) string {
	return clip(g.red.String(strings.ToValidUTF8(s, "\uFFFD")), n)
}

// methodName returns m if it is a standard method and "OTHER" otherwise, so a client cannot
// put arbitrary text into the audit log through the method.
func methodName(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "OTHER"
}

// refuse answers with status and a JSON error, and marks the exchange denied.
func (g *Gateway) refuse(w http.ResponseWriter, ex *exchange, status int, msg string) {
	g.fail(w, ex, status, decisionDenied, msg)
}

// fail answers with status and a JSON {"error": msg} (key redacted) and records the decision.
// A refusal the sandbox can provoke at will (tallyByStatus) is counted, not recorded alone.
func (g *Gateway) fail(w http.ResponseWriter, ex *exchange, status int, decision, msg string) {
	msg = g.red.String(msg)
	ex.decision, ex.reason, ex.tally = decision, msg, tallyByStatus[status]
	writeJSON(w, status, map[string]string{"error": msg})
}

// methodNotAllowed refuses a request with the wrong method for its route.
func (g *Gateway) methodNotAllowed(w http.ResponseWriter, ex *exchange, allow string) {
	w.Header().Set("Allow", allow)
	g.refuse(w, ex, http.StatusMethodNotAllowed, "method not allowed (want "+allow+")")
}

// readBody reads the request body, at most limit bytes; an oversize body is refused with 413.
func (g *Gateway) readBody(w http.ResponseWriter, r *http.Request, ex *exchange, limit int64) ([]byte, bool) {
	if r.ContentLength > limit {
		g.refuse(w, ex, http.StatusRequestEntityTooLarge, "request body over the "+strconv.FormatInt(limit, 10)+" byte limit")
		return nil, false
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			g.refuse(w, ex, http.StatusRequestEntityTooLarge, "request body over the "+strconv.FormatInt(limit, 10)+" byte limit")
		} else {
			g.fail(w, ex, http.StatusBadRequest, decisionError, "read request body: "+err.Error())
		}
		return nil, false
	}
	return b, true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// recorder notes the status and the bytes written. Unwrap lets http.ResponseController
// reach the connection's Flush.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (r *recorder) WriteHeader(code int) {
	r.status = cmp.Or(r.status, code)
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(p []byte) (int, error) {
	r.status = cmp.Or(r.status, http.StatusOK)
	n, err := r.ResponseWriter.Write(p)
	r.bytes += int64(n)
	return n, err
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// countingBody counts the request body bytes the handler read.
type countingBody struct {
	io.ReadCloser
	n int64
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.n += int64(n)
	return n, err
}
