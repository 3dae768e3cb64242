package worker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/agora-dev/agora/internal/runtime/claudert"
	"github.com/agora-dev/agora/internal/secret/redact"
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
// The marks live in the worker's scratch directory, which everything in the sandbox shares,
// the agent's own commands included. A process the agent left running could delete marks
// (a call that ran then looks unrecorded, and the run stops) or forge them (the worst: a
// later refused call gets no entry of its own, as if its hook had recorded it). It cannot
// erase or change an entry the gateway recorded, nor make a refused call read "allowed":
// like any report from the sandbox, the marks are evidence, and the sandbox is the boundary.
//
// Its reports come after claude printed the result, yet in order: the relay holds claude's
// next model request until every call claude printed has its result reported (see gate), so
// the next call's hooks cannot overtake them. Any failure to report stops the run (fail
// closed).
type claudeAudit struct {
	gw    *gatewayClient
	marks string
	red   *redact.Redactor
	tools []string // built-in tools the grant covers
	mcp   []string // MCP servers the grant covers
	stop  context.CancelCauseFunc

	verdict     chan struct{} // closed once the init event was checked, or the run failed
	verdictOnce sync.Once

	mu      sync.Mutex
	err     error         // guarded by mu: the first failure, the run's
	pending int           // guarded by mu: calls printed whose result is not yet reported
	changed chan struct{} // guarded by mu: closed (and replaced) when pending goes down

	// Touched by the Observer methods, which run one at a time on the parsing goroutine,
	// and by finish, after that goroutine is done.
	initSeen bool
	calls    map[string]*seenCall
	order    []string // call ids in the order claude asked for them
}

// seenCall is one tool call from claude's output.
type seenCall struct {
	name, hash string
	done       bool // its end is on record
}

func newClaudeAudit(gw *gatewayClient, marks string, red *redact.Redactor, tools, mcp []string, stop context.CancelCauseFunc) *claudeAudit {
	return &claudeAudit{gw: gw, marks: marks, red: red, tools: tools, mcp: mcp, stop: stop,
		verdict: make(chan struct{}), changed: make(chan struct{}), calls: map[string]*seenCall{}}
}

// settleWait bounds how long a model request waits for the results claude printed before
// it to be reported; a result claude's output lost would otherwise hold the run forever.
const settleWait = 30 * time.Second

// settled waits until every call claude printed has its result reported, at most
// settleWait.
func (a *claudeAudit) settled(ctx context.Context) {
	t := time.NewTimer(settleWait)
	defer t.Stop()
	for {
		a.mu.Lock()
		n, ch := a.pending, a.changed
		a.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-ch:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
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
	if a.err == nil {
		a.err = err
	}
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
	if _, ok := a.calls[c.ID]; ok {
		return
	}
	a.order = append(a.order, c.ID)
	a.calls[c.ID] = &seenCall{name: c.Name, hash: argsHash(a.red, c.Input)}
	a.mu.Lock()
	a.pending++
	a.mu.Unlock()
}

func (a *claudeAudit) ToolResult(r claudert.ToolResult) {
	c := a.calls[r.ID]
	if c == nil {
		// A call whose line claude's output lost (over the line cap): its name is unknown.
		c = &seenCall{name: "unknown", hash: argsHash(a.red, nil)}
		a.calls[r.ID] = c
	} else if !c.done {
		defer a.resolved()
	}
	if c.done {
		return
	}
	c.done = true
	pre := readMark(a.marks, r.ID, markPre)
	ran := readMark(a.marks, r.ID, markRan)
	rep := toolReport{Tool: c.name, ArgsHash: c.hash, CallID: auditCallID(r.ID)}
	if pre != "" {
		rep.Phase = phasePost
	}
	switch {
	case readMark(a.marks, r.ID, markPost) != "" || pre == "denied":
		return // the hook recorded the call to its end
	case ran != "" || !r.IsError:
		// It ran, and its hook did not record how it ended.
		rep.Decision, rep.Reason = "allowed", reasonRan
		if d, reason, ok := strings.Cut(ran, "\n"); ok {
			rep.Decision, rep.Reason = d, reason
		}
		if pre == "" {
			rep.Reason = reasonNoPreHook
		}
	case r.NoSuchTool && pre == "":
		rep.Decision, rep.Reason = "denied", reasonNotLoaded
	case pre == decisionRequested:
		// Past the pre-tool hook, short of running: claude's permission check refused it.
		rep.Decision, rep.Reason = "denied", reasonRuleDenied
	default:
		rep.Decision, rep.Reason = "denied", reasonRefused
	}
	if err := a.gw.report(context.Background(), rep); err != nil {
		a.fail(fmt.Errorf("claude's %s call could not be recorded in the audit log: %w", auditToolName(c.name), err))
		return
	}
	if pre == "" && rep.Decision != "denied" {
		a.fail(fmt.Errorf("claude ran %s without agora's pre-tool audit hook: the call was not on record before it ran", auditToolName(c.name)))
	}
}

// finish completes the record after claude exited: a refusal in the result's
// permission_denials whose tool result was never seen, and an outcome a hook marked but
// could not report. A call cut off while it ran stays on record as "requested". When claude
// ended well but never wrote an init event, the tools it loaded were never checked, and the
// run fails.
func (a *claudeAudit) finish(ctx context.Context, res claudert.Result, runErr error) {
	for _, d := range res.Denials {
		c := a.calls[d.ID]
		if c == nil {
			c = &seenCall{name: d.Name, hash: argsHash(a.red, nil)}
			a.calls[d.ID] = c
			a.order = append(a.order, d.ID)
		}
		if c.done {
			continue
		}
		c.done = true
		rep := toolReport{Tool: c.name, ArgsHash: c.hash, CallID: auditCallID(d.ID), Decision: "denied", Reason: reasonRuleDenied}
		if readMark(a.marks, d.ID, markPre) != "" {
			rep.Phase = phasePost
		}
		if err := a.gw.report(ctx, rep); err != nil {
			a.fail(fmt.Errorf("claude's %s call could not be recorded in the audit log: %w", auditToolName(c.name), err))
			return
		}
	}
	for _, id := range a.order {
		c := a.calls[id]
		ran := readMark(a.marks, id, markRan)
		if c.done || ran == "" || readMark(a.marks, id, markPost) != "" {
			continue
		}
		c.done = true
		d, reason, _ := strings.Cut(ran, "\n")
		rep := toolReport{Tool: c.name, ArgsHash: c.hash, CallID: auditCallID(id), Phase: phasePost, Decision: d, Reason: reason}
		if err := a.gw.report(ctx, rep); err != nil {
			a.fail(fmt.Errorf("claude's %s call could not be recorded in the audit log: %w", auditToolName(c.name), err))
			return
		}
	}
	if !a.initSeen && runErr == nil {
		a.fail(errors.New("claude wrote no init event: the tools it loaded were never checked"))
	}
}

// gate returns a gateway client for the model relay whose requests wait for the init
// event's check and are refused once the run failed (a claude that loaded more than the
// grant covers never reaches the model), and wait until the results claude printed are
// reported (claude sends its next request after it printed the last results).
func (a *claudeAudit) gate(gw *gatewayClient) *gatewayClient {
	return &gatewayClient{http: &http.Client{Transport: gatedTransport{next: gw.http.Transport, a: a}}}
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
	if t.a.failed() == nil {
		t.a.settled(req.Context())
	}
	if t.a.failed() != nil {
		return nil, errors.New("agora: this run is stopped")
	}
	return t.next.RoundTrip(req)
}

// cut shortens s to at most n bytes of valid UTF-8 for a message.
func cut(s string, n int) string { return truncate(strings.ToValidUTF8(s, ""), n) }
