package claudeadapter

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/agora-dev/agora/internal/runtime/agentrun"
	"github.com/agora-dev/agora/internal/strictjson"
)

// hookRelay is how the worker learns what claude's tool hooks put on record, without
// trusting anything the agent can write. The hooks do not talk to the gateway themselves:
// they report to this relay, served by the worker on an abstract Unix socket, which sends
// each report on to the gateway's /audit/tool and remembers, in the worker's own memory,
// the reports the gateway kept, per call id. claudeAudit then decides each call from
// claude's output and this memory alone: a call whose result says it ran must have a "pre"
// report kept here; a call claude refused is "denied" whatever was reported for it.
//
// The socket is abstract (no file the agent could replace: a name the worker holds while it
// runs) and randomly named. Abstract names belong to a network namespace, which is the
// host's under `network: host`, and /proc/net/unix lists them; so the relay accepts only
// peers of the worker's own uid and PID namespace (samePeer). Anything in the sandbox may
// still connect to it, as it may to the gateway: a process that learns a call
// id before claude's hook reports it can report it first. The gateway keeps one "pre" per
// call id, so the hook's own report is then refused and the hook blocks the call; and the
// worker compares every kept report with the call claude printed (tool and arguments), so a
// forged report that does not tell the call as it was stops the run. See docs/runtimes.md.
type hookRelay struct {
	name string // the socket's address, "@agora-hook-<random>"
	ln   net.Listener
	srv  *http.Server
	gw   *agentrun.Gateway

	mu    sync.Mutex
	calls map[string]*hookRecord // guarded by mu: kept reports by call id

	// printed vouches for would_deny reports (hookvouch.go); set (vouchWith) before claude
	// starts, nil refuses every would_deny. Guarded by mu.
	printed *printedCalls
	// writes learns a learn dispatch's Write outside the workspace (claudelearn.go); nil
	// outside learn. Guarded by mu.
	writes *claudeWrites
}

// vouchWith makes p the relay's judge of would_deny reports.
func (r *hookRelay) vouchWith(p *printedCalls) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.printed = p
}

// hookRecord is what the gateway kept of one call id's hook reports.
type hookRecord struct {
	pre, post *hookReport
	preAt     time.Time
}

// maxHookCalls bounds the call ids the relay remembers; the gateway's audit budget bounds
// them first.
const maxHookCalls = 1 << 16

// startHookRelay listens on a fresh abstract socket and serves the hooks' reports.
func startHookRelay(gw *agentrun.Gateway) (*hookRelay, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	name := "@agora-hook-" + hex.EncodeToString(b[:])
	ln, err := net.Listen("unix", name)
	if err != nil {
		return nil, fmt.Errorf("listen for the tool hooks: %w", err)
	}
	r := &hookRelay{name: name, ln: ln, gw: gw, calls: map[string]*hookRecord{}}
	r.srv = &http.Server{Handler: http.HandlerFunc(r.serve), ReadHeaderTimeout: 10 * time.Second}
	go r.srv.Serve(samePeer{ln}) //nolint:errcheck // ends with close
	return r, nil
}

func (r *hookRelay) close() { r.srv.Close() }

// record returns a copy of what is kept for call id, and whether there is anything.
func (r *hookRelay) record(id string) (hookRecord, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.calls[id]
	if !ok {
		return hookRecord{}, false
	}
	return *c, true
}

// keep notes a report the gateway kept.
func (r *hookRelay) keep(rep hookReport) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.calls[rep.CallID]
	if c == nil {
		c = &hookRecord{}
		r.calls[rep.CallID] = c
	}
	switch rep.Phase {
	case agentrun.PhasePre:
		if c.pre == nil {
			c.pre, c.preAt = &rep, time.Now()
		}
	case agentrun.PhasePost:
		if c.post == nil {
			c.post = &rep
		}
	}
}

func (r *hookRelay) serve(w http.ResponseWriter, req *http.Request) {
	answer := func(status int, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(map[string]string{"error": msg}) //nolint:errcheck // the hook reads what arrives
	}
	if req.Method == http.MethodPost && req.URL.Path == "/approval" {
		r.serveApproval(w, req, answer)
		return
	}
	if req.Method == http.MethodPost && req.URL.Path == "/learn/file" {
		r.serveLearnFile(w, req, answer)
		return
	}
	if req.Method != http.MethodPost || req.URL.Path != "/audit/tool" {
		answer(http.StatusNotFound, "the hook relay serves POST /audit/tool and /approval only")
		return
	}
	b, err := io.ReadAll(io.LimitReader(req.Body, maxHookReport+1))
	if err != nil {
		answer(http.StatusBadRequest, "tool audit: the report could not be read")
		return
	}
	rep, err := parseHookReport(b)
	if err != nil {
		answer(http.StatusBadRequest, err.Error())
		return
	}
	r.mu.Lock()
	full := len(r.calls) >= maxHookCalls && r.calls[rep.CallID] == nil
	c := r.calls[rep.CallID]
	var preAt time.Time
	if c != nil {
		preAt = c.preAt
	}
	r.mu.Unlock()
	if full {
		answer(http.StatusBadRequest, "tool audit: too many calls in this run")
		return
	}
	if rep.Decision == agentrun.DecisionWouldDeny {
		r.mu.Lock()
		printed := r.printed
		r.mu.Unlock()
		if rep, err = printed.vouch(req.Context(), rep); err != nil {
			answer(http.StatusBadRequest, err.Error())
			return
		}
	}
	tr := agentrun.ToolReport{Tool: rep.Tool, Decision: rep.Decision, Reason: rep.Reason, ArgsHash: rep.ArgsHash,
		Duration: time.Duration(rep.DurationMS) * time.Millisecond, Phase: rep.Phase, CallID: rep.CallID, Command: rep.Command, Via: agentrun.ViaHook}
	if rep.Phase == agentrun.PhasePost && rep.DurationMS == 0 && !preAt.IsZero() {
		// claude gave no duration: the time since the call's pre report bounds it.
		tr.Duration = time.Since(preAt)
	}
	// The hook's own deadline bounds this one; the gateway's refusals go back as they came.
	if err := r.gw.Report(context.WithoutCancel(req.Context()), tr); err != nil {
		answer(http.StatusBadRequest, err.Error())
		return
	}
	if rep.Decision != agentrun.DecisionWouldDeny {
		// A would_deny precedes the call's own pre report (requested), which is what the
		// worker pairs its outcome with.
		r.keep(rep)
	}
	w.WriteHeader(http.StatusNoContent)
}

// maxHookReport caps a hook's report, as the gateway caps /audit/tool.
const maxHookReport = 4 << 10

// hookReport is one phase of a call, as a hook reports it (the body agentrun.Gateway.report
// sends).
type hookReport struct {
	Tool       string `json:"tool"`
	Decision   string `json:"decision"`
	Reason     string `json:"reason"`
	ArgsHash   string `json:"args_hash"`
	DurationMS int64  `json:"duration_ms"`
	Phase      string `json:"phase"`
	CallID     string `json:"call_id"`
	// Command is a learn dispatch's would_deny's command line (Bash's); "" otherwise.
	Command string `json:"command"`
}

// parseHookReport reads a hook's report strictly: one JSON object (one reading, no
// unknown field), with a phase and a call id; the gateway checks the rest. Errors name the
// field, never its value.
func parseHookReport(b []byte) (hookReport, error) {
	var r hookReport
	if len(b) > maxHookReport {
		return r, fmt.Errorf("tool audit: over the %d byte limit", maxHookReport)
	}
	if err := strictjson.CheckObject(b); err != nil {
		return r, fmt.Errorf("tool audit: %w", err)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&r); err != nil {
		return r, errors.New("tool audit: not a report of a tool call")
	}
	switch {
	case r.Phase != agentrun.PhasePre && r.Phase != agentrun.PhasePost:
		return r, errors.New("tool audit: phase: want pre or post")
	case r.CallID == "" || agentrun.AuditCallID(r.CallID) != r.CallID:
		return r, errors.New("tool audit: call_id: want 1 to 128 letters, digits, '_' and '-'")
	case r.DurationMS < 0 || r.DurationMS > maxDurationMS:
		return r, fmt.Errorf("tool audit: duration_ms: want 0 to %d", int64(maxDurationMS))
	}
	return r, nil
}

// maxApprovalRequest caps a held call's request, as the gateway caps /approval.
const maxApprovalRequest = 1<<20 + 4<<10

// serveApproval passes a hook's held call on to the gateway's /approval and its decision
// back. The gateway checks the request and computes what a person sees; the relay only
// reads it strictly and waits as long as the gateway does.
func (r *hookRelay) serveApproval(w http.ResponseWriter, req *http.Request, answer func(int, string)) {
	b, err := io.ReadAll(io.LimitReader(req.Body, maxApprovalRequest+1))
	if err != nil || len(b) > maxApprovalRequest {
		answer(http.StatusBadRequest, "approval: the request could not be read or is too large")
		return
	}
	var in struct {
		Tool   string          `json:"tool"`
		CallID string          `json:"call_id"`
		Rule   string          `json:"rule"`
		Args   json.RawMessage `json:"args"`
	}
	if err := strictjson.Unmarshal(b, &in); err != nil {
		answer(http.StatusBadRequest, "approval: "+err.Error())
		return
	}
	a, err := r.gw.Approval(req.Context(), in.Tool, in.CallID, in.Rule, in.Args)
	if err != nil {
		answer(http.StatusBadGateway, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(agentrun.ApprovalAnswer{Decision: a.State, Reason: a.Reason, Actor: a.Actor, ArgsDigest: a.ArgsDigest}) //nolint:errcheck // the hook reads what arrives
}
