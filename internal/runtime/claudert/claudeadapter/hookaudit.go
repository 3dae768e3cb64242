package claudeadapter

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/agora-dev/agora/internal/runtime/agentrun"
	"github.com/agora-dev/agora/internal/runtime/claudert"
	"github.com/agora-dev/agora/internal/secret/redact"
	"github.com/agora-dev/agora/internal/strictjson"
)

// claudeAudit reads claude's output as it is parsed (a [claudert.Observer]) and completes,
// live, what the hooks (hook.go) cannot see:
//
//   - the init event: every tool claude loaded must be covered by the grant, and claude
//     must run in the dontAsk permission mode; otherwise the run is stopped before the
//     model is asked anything (the relay to the model waits for this check, see gate);
//   - each tool result whose call no hook recorded to its end: a tool claude did not load
//     ("No such tool available"), a call claude's permission rules refused after the
//     pre-tool hook recorded it "requested", a call refused before any hook ran: each is
//     reported "denied" with its reason;
//   - the outcome of a call that ran when its post-tool hook could not report it;
//   - a call that ran without the pre-tool hook (the hooks did not run, or one was killed):
//     it is reported as it is, and the run is stopped, because it was not on record before
//     it ran.
//
// Every outcome is decided from claude's output and from what the hook relay (hookrelay.go)
// saw the gateway keep, both in the worker's memory; nothing the agent can write (a file in
// /tmp, say) counts. A refusal claude printed is "denied" whatever was reported for the
// call: a kept report that says it ran stops the run. Calls are told apart by their order
// in claude's output, not by id: an id claude prints twice is the model's (or its
// endpoint's) doing, and stops the run once that call is reported.
//
// Its reports come after claude printed the result, yet in order: the relay holds claude's
// next model request until every call claude printed has its result reported (see gate), so
// the next call's hooks cannot overtake them. Any failure to report stops the run (fail
// closed).
type claudeAudit struct {
	gw    *agentrun.Gateway
	hooks *hookRelay
	// printed is told every call claude prints, so the relay vouches for would_deny
	// reports (hookvouch.go); nil outside a run.
	printed *printedCalls
	red     *redact.Redactor
	dir     string   // claude's working directory, the workspace: a relative file path is in it
	tools   []string // built-in tools the grant covers
	mcp     []string // MCP servers the grant covers
	stop    context.CancelCauseFunc

	verdict     chan struct{} // closed once the init event was checked, or the run failed
	verdictOnce sync.Once

	mu      sync.Mutex
	err     error // guarded by mu: the first failure, the run's
	pending int   // guarded by mu: calls printed whose result is not yet reported
	// reported counts, per call id, the results claude printed that were handled.
	reported map[string]int // guarded by mu
	changed  chan struct{}  // guarded by mu: closed (and replaced) when pending goes down

	// Touched by the Observer methods, which run one at a time on the parsing goroutine,
	// and by finish, after that goroutine is done.
	initSeen bool
	calls    []*seenCall          // in the order claude printed them
	byID     map[string]*seenCall // the call of each id (an id is one call's, else the run stops)
	// repeated is the failure of a repeated call id, raised once that call's result is
	// reported (so the call is on record), or at finish.
	repeated error
}

// seenCall is one tool call from claude's output.
type seenCall struct {
	id, name, hash string
	repeat         bool // its id is an earlier call's: the gateway holds that call's reports
	done           bool // its end is on record
	// refused is true when it is on record "denied" because claude's rules or a hook
	// refused it, which claude's permission_denials must confirm.
	refused bool
}

func newClaudeAudit(gw *agentrun.Gateway, hooks *hookRelay, red *redact.Redactor, tools, mcp []string, stop context.CancelCauseFunc) *claudeAudit {
	return &claudeAudit{gw: gw, hooks: hooks, red: red, tools: tools, mcp: mcp, stop: stop,
		verdict: make(chan struct{}), changed: make(chan struct{}), byID: map[string]*seenCall{}, reported: map[string]int{}}
}

// settleWait bounds how long a model request waits for the results claude printed before
// it to be reported; a result claude's output lost would otherwise hold the run forever.
var settleWait = 30 * time.Second

// settled waits until every call claude printed has its result reported, and every
// result the request sends the model (want: how many times each call id has a tool_result
// in it) was reported too, at most settleWait. claude may send its request before the
// worker has read the lines it printed: the request itself says which results it carries.
// It returns false when a result the request carries was not reported in time: a result
// claude sends the model that its output never showed is a call the audit cannot hold.
func (a *claudeAudit) settled(ctx context.Context, want map[string]int) bool {
	t := time.NewTimer(settleWait)
	defer t.Stop()
	for {
		a.mu.Lock()
		n, ch := a.pending, a.changed
		short := false
		for id, k := range want {
			if a.reported[id] < k {
				short = true
			}
		}
		a.mu.Unlock()
		if n == 0 && !short {
			return true
		}
		select {
		case <-ch:
		case <-t.C:
			return !short
		case <-ctx.Done():
			return !short
		}
	}
}

// resultReported counts a result of call id as reported.
func (a *claudeAudit) resultReported(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reported[id]++
	close(a.changed)
	a.changed = make(chan struct{})
}

// resolved counts one printed call's result as reported.
func (a *claudeAudit) resolved() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.pending > 0 {
		a.pending--
	}
	close(a.changed)
	a.changed = make(chan struct{})
}

// fail records the run's first failure and stops claude.
func (a *claudeAudit) fail(err error) {
	a.mu.Lock()
	a.err = cmp.Or(a.err, err)
	a.mu.Unlock()
	a.verdictOnce.Do(func() { close(a.verdict) })
	a.stop(err)
}

// failed returns the run's first failure, or nil.
func (a *claudeAudit) failed() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

func (a *claudeAudit) Init(in claudert.Init) {
	a.initSeen = true
	if in.PermissionMode != claudert.PermissionMode {
		a.fail(fmt.Errorf("claude runs in permission mode %q, not %q; it is stopped", cut(in.PermissionMode, 64), claudert.PermissionMode))
		return
	}
	for _, t := range in.Tools {
		if !coveredBy(t, a.tools, a.mcp) {
			a.fail(fmt.Errorf("claude loaded tool %q, which the grant does not cover; it is stopped before the model is asked anything", cut(t, 128)))
			return
		}
	}
	a.verdictOnce.Do(func() { close(a.verdict) })
}

func (a *claudeAudit) ToolCall(c claudert.ToolCall) {
	if !a.initSeen {
		a.fail(errors.New("claude called a tool before its init event: the tools it loaded were never checked"))
		return
	}
	call := &seenCall{id: c.ID, name: c.Name, hash: callHash(a.red, c.Name, c.Input, a.dir)}
	if _, ok := a.byID[c.ID]; ok {
		// The gateway pairs a call's reports by id, and holds the first call's: this one
		// could never be on record as itself. It is reported from its result without its id,
		// and then the run stops; meanwhile the gate lets no model request through.
		call.repeat = true
		if a.repeated == nil {
			a.repeated = fmt.Errorf("the model gave a second tool call (%s) the id %s of an earlier call: calls could not be told apart in the audit, so claude is stopped",
				agentrun.AuditToolName(c.Name), agentrun.AuditCallID(c.ID))
			a.mu.Lock()
			a.err = cmp.Or(a.err, a.repeated)
			a.mu.Unlock()
		}
	} else {
		a.byID[c.ID] = call
		if a.printed != nil {
			a.printed.saw(c.ID, c.Name, call.hash, c.Input)
		}
	}
	a.calls = append(a.calls, call)
	a.mu.Lock()
	a.pending++
	a.mu.Unlock()
}

// resultCall returns the first call claude printed with id whose result is not yet in,
// or nil.
func (a *claudeAudit) resultCall(id string) *seenCall {
	for _, c := range a.calls {
		if c.id == id && !c.done {
			return c
		}
	}
	return nil
}

func (a *claudeAudit) ToolResult(r claudert.ToolResult) {
	defer a.resultReported(r.ID)
	c := a.resultCall(r.ID)
	if c == nil {
		if _, ok := a.byID[r.ID]; ok {
			a.fail(fmt.Errorf("claude printed a second result for tool call %s: the stream is not claude's alone, so claude is stopped", agentrun.AuditCallID(r.ID)))
			return
		}
		// A call whose line claude's output lost (over the line cap): its name is unknown.
		c = &seenCall{id: r.ID, name: "unknown", hash: agentrun.ArgsHash(a.red, nil)}
		a.byID[r.ID] = c
		a.calls = append(a.calls, c)
	} else {
		defer a.resolved()
	}
	c.done = true
	if err := checkNoPreload(nil); err != nil {
		a.fail(fmt.Errorf("%w; claude is stopped", err))
	}
	if err := a.settle(context.Background(), c, r); err != nil {
		a.fail(err)
	}
	if c.repeat {
		a.fail(a.repeated)
	}
}

// settle puts the end of call c on record from its result r and what the hooks' relay saw
// the gateway keep, and returns the error that stops the run, if any.
func (a *claudeAudit) settle(ctx context.Context, c *seenCall, r claudert.ToolResult) error {
	var rec hookRecord
	if !c.repeat {
		rec, _ = a.hooks.record(c.id)
	}
	name := agentrun.AuditToolName(c.name)
	if rec.pre != nil && (rec.pre.Tool != name || rec.pre.ArgsHash != c.hash) {
		return fmt.Errorf("the pre-tool report of claude's %s call %s names another call than the one claude made: it was not the hook's, so claude is stopped", name, agentrun.AuditCallID(c.id))
	}
	refusal := r.NoSuchTool || r.UseError || r.PermissionDenied || r.HookBlocked
	if refusal {
		if rec.post != nil || (rec.pre != nil && rec.pre.Decision == "denied" && !r.HookBlocked) {
			// A report said it ran (or that agora's hook refused it) where claude refused it
			// otherwise: whoever sent it, the audit and claude disagree.
			return fmt.Errorf("claude refused its %s call %s, but a report of it on record says otherwise: it was not the hook's, so claude is stopped", name, agentrun.AuditCallID(c.id))
		}
		if rec.pre != nil && rec.pre.Decision == "denied" {
			c.refused = true
			return nil // agora's hook refused it, on record
		}
		rep := agentrun.ToolReport{Tool: c.name, ArgsHash: c.hash, Decision: "denied"}
		switch {
		case r.NoSuchTool:
			rep.Reason = reasonNotLoaded
		case r.PermissionDenied:
			rep.Reason, c.refused = reasonRuleDenied, true
		case r.HookBlocked:
			rep.Reason, c.refused = reasonHookBlocked, true
		default:
			rep.Reason = reasonRefused
		}
		return a.report(ctx, c, rec, rep)
	}
	// It ran (an error result claude did not word as a refusal is the tool's failure).
	if rec.pre == nil {
		rep := agentrun.ToolReport{Tool: c.name, ArgsHash: c.hash, Decision: "allowed", Reason: reasonNoPreHook}
		if r.IsError {
			rep.Decision = "error"
		}
		err := a.report(ctx, c, rec, rep)
		return errors.Join(err, fmt.Errorf("claude ran %s without agora's pre-tool audit hook: the call was not on record before it ran", name))
	}
	if rec.pre.Decision != agentrun.DecisionRequested {
		return fmt.Errorf("claude ran its %s call %s, which is on record as refused: the report was not the hook's, so claude is stopped", name, agentrun.AuditCallID(c.id))
	}
	if rec.post != nil {
		if rec.post.Decision == "denied" {
			return fmt.Errorf("claude ran its %s call %s, which is on record as refused: the report was not the hook's, so claude is stopped", name, agentrun.AuditCallID(c.id))
		}
		return nil // the hook recorded it to its end
	}
	rep := agentrun.ToolReport{Tool: c.name, ArgsHash: c.hash, Decision: "allowed", Reason: reasonRan}
	if r.IsError {
		rep.Decision, rep.Reason = "error", reasonFailed
	}
	return a.report(ctx, c, rec, rep)
}

// report puts rep on record as call c's end: its post report when its pre report is on
// record, else its only report. A repeated call is reported without its id, which is
// the earlier call's.
func (a *claudeAudit) report(ctx context.Context, c *seenCall, rec hookRecord, rep agentrun.ToolReport) error {
	if !c.repeat {
		rep.CallID = agentrun.AuditCallID(c.id)
		if rec.pre != nil {
			rep.Phase = agentrun.PhasePost
		}
	}
	if err := a.gw.Report(ctx, rep); err != nil {
		return fmt.Errorf("claude's %s call could not be recorded in the audit log: %w", agentrun.AuditToolName(c.name), err)
	}
	return nil
}

// finish completes the record after claude exited: a refusal in the result's
// permission_denials whose tool result was never seen. A call cut off while it ran stays on
// record as "requested". Once claude wrote its result, every call put on record as refused
// by its rules or a hook must be in permission_denials, as claude lists them: otherwise the
// refusal was read from text that was not claude's, and the run fails. When claude ended
// well but never wrote an init event, the tools it loaded were never checked, and the run
// fails. A repeated call id fails the run.
func (a *claudeAudit) finish(ctx context.Context, res claudert.Result, runErr error) {
	listed := map[string]bool{}
	for _, d := range res.Denials {
		listed[d.ID] = true
		c := a.resultCall(d.ID)
		if c == nil {
			if _, ok := a.byID[d.ID]; ok {
				continue
			}
			c = &seenCall{id: d.ID, name: d.Name, hash: agentrun.ArgsHash(a.red, nil)}
			a.byID[d.ID] = c
			a.calls = append(a.calls, c)
		}
		c.done, c.refused = true, true
		var rec hookRecord
		if !c.repeat {
			rec, _ = a.hooks.record(c.id)
		}
		if rec.pre != nil && rec.pre.Decision == "denied" {
			continue
		}
		if rec.post != nil {
			a.fail(fmt.Errorf("claude refused its %s call %s, but a report of it on record says otherwise: it was not the hook's", agentrun.AuditToolName(c.name), agentrun.AuditCallID(c.id)))
			return
		}
		if err := a.report(ctx, c, rec, agentrun.ToolReport{Tool: c.name, ArgsHash: c.hash, Decision: "denied", Reason: reasonRuleDenied}); err != nil {
			a.fail(err)
			return
		}
	}
	if res.Subtype != "" {
		for _, c := range a.calls {
			if c.refused && !listed[c.id] {
				a.fail(fmt.Errorf("claude's %s call %s is on record as refused, but claude does not list it among its permission denials: its result was not claude's refusal", agentrun.AuditToolName(c.name), agentrun.AuditCallID(c.id)))
				return
			}
		}
	}
	if a.repeated != nil {
		a.fail(a.repeated)
	}
	if !a.initSeen && runErr == nil {
		a.fail(errors.New("claude wrote no init event: the tools it loaded were never checked"))
	}
}

// gate returns a gateway client for the model relay whose requests wait for the init
// event's check and are refused once the run failed (a claude that loaded more than the
// grant covers never reaches the model), and wait until the results claude printed are
// reported (claude sends its next request after it printed the last results).
func (a *claudeAudit) gate(gw *agentrun.Gateway) *agentrun.Gateway {
	return &agentrun.Gateway{HTTP: &http.Client{Transport: gatedTransport{next: gw.HTTP.Transport, a: a}}}
}

type gatedTransport struct {
	next http.RoundTripper
	a    *claudeAudit
}

func (t gatedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	select {
	case <-t.a.verdict:
	case <-req.Context().Done():
		return nil, req.Context().Err()
	}
	var want map[string]int
	if req.Body != nil {
		b, err := io.ReadAll(io.LimitReader(req.Body, maxModelRequest+1))
		req.Body.Close()
		if err != nil || len(b) > maxModelRequest {
			return nil, fmt.Errorf("agora: claude's model request could not be read or is over %d bytes", maxModelRequest)
		}
		if want, err = requestResults(b); err != nil {
			return nil, fmt.Errorf("agora: claude's model request: %w", err)
		}
		req.Body = io.NopCloser(bytes.NewReader(b))
		req.ContentLength = int64(len(b))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	}
	if t.a.failed() == nil && !t.a.settled(req.Context(), want) && req.Context().Err() == nil {
		t.a.fail(errors.New("claude sent the model a tool result its output never showed: that call is not on record, so claude is stopped"))
	}
	if t.a.failed() != nil {
		return nil, errors.New("agora: this run is stopped")
	}
	return t.next.RoundTrip(req)
}

// maxModelRequest caps a model request the gate reads (claude's conversation so far).
const maxModelRequest = 64 << 20

// requestResults counts, per call id, the tool_result blocks of a Messages API request's
// messages, read exactly as the model API reads them (strictjson: no key twice, none that
// matches "messages", "type" or "tool_use_id" only under case folding), so a result the
// model will see is never one the gate missed. A body that is not JSON has none (the gateway
// refuses it); JSON that is not one exact document is an error, and the request is refused.
func requestResults(b []byte) (map[string]int, error) {
	if !json.Valid(b) {
		return nil, nil
	}
	var req struct {
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := strictjson.UnmarshalKnown(b, &req); err != nil {
		if te := (*json.UnmarshalTypeError)(nil); errors.As(err, &te) {
			return nil, nil // not a Messages request (messages is no list): the gateway judges it
		}
		return nil, err
	}
	n := map[string]int{}
	for _, m := range req.Messages {
		if len(m.Content) == 0 || m.Content[0] != '[' {
			continue
		}
		var blocks []struct {
			Type      string `json:"type"`
			ToolUseID string `json:"tool_use_id"`
		}
		if err := strictjson.UnmarshalKnown(m.Content, &blocks); err != nil {
			if te := (*json.UnmarshalTypeError)(nil); errors.As(err, &te) {
				continue
			}
			return nil, err
		}
		for _, bl := range blocks {
			if bl.Type == "tool_result" && bl.ToolUseID != "" {
				n[bl.ToolUseID]++
			}
		}
	}
	return n, nil
}

// cut shortens s to at most n bytes of valid UTF-8 for a message.
func cut(s string, n int) string { return agentrun.Truncate(strings.ToValidUTF8(s, ""), n) }
