package dispatch

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agora-dev/agora/internal/budget"
	"github.com/agora-dev/agora/internal/digest"
	"github.com/agora-dev/agora/internal/egress/proxy"
	"github.com/agora-dev/agora/internal/errclass"
	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/verdict"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// EnvRef names an env bundle version a dispatch used.
type EnvRef struct {
	Name   string        `json:"name"`
	Digest digest.Digest `json:"digest"`
}

// Record is the durable record of one dispatch. State is one of [lifecycle.DispatchStates],
// Reason (set when it failed or was cancelled) one of [lifecycle.Reasons].
type Record struct {
	ID             string        `json:"id"`
	State          string        `json:"state"`
	Reason         string        `json:"reason,omitempty"`
	Detail         string        `json:"detail,omitempty"`
	ExitCode       *int          `json:"exit_code,omitempty"`
	Subagent       string        `json:"subagent"`
	SubagentDigest digest.Digest `json:"subagent_digest"`
	Envs           []EnvRef      `json:"envs"`
	Target         string        `json:"target"`
	Sandbox        string        `json:"sandbox"`
	Network        string        `json:"network"`
	InputDigest    digest.Digest `json:"input_digest"`
	Repo           string        `json:"repo,omitempty"`
	Revision       string        `json:"revision,omitempty"`
	Timeout        Duration      `json:"timeout"`
	ParentID       string        `json:"parent_id,omitempty"`
	Actor          string        `json:"actor"`
	ProviderTaskID string        `json:"provider_task_id,omitempty"`
	Isolation      string        `json:"isolation,omitempty"`
	CallbackURL    string        `json:"callback_url,omitempty"`
	Inputs         []Input       `json:"inputs,omitempty"`
	// Grants is what the worker was granted: the subagent's grant, narrowed by the dispatch.
	// nil only on records written before grants were recorded (they ran with the whole grant).
	Grants    *grant.Set `json:"grants,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	StartedAt *time.Time `json:"started_at,omitempty"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
	Result    *Result    `json:"result,omitempty"`
	Events    []Event    `json:"events"`

	// Workspace is the workspace the dispatch named, NAME@sha256:HEX; Repo is then its
	// repository (a host path: never shown over MCP) and Revision the commit it resolved to.
	Workspace string `json:"workspace,omitempty"`

	// StackBase is where a stacked dispatch (one with Stack inputs) starts: the commit agora
	// made on Revision by applying those patches in order, one commit each (the tree, for a
	// dispatch without a repository), computed at accept and made again, identically, for
	// its workspace and its verify gate. Its patch is taken against it. "" for every other
	// dispatch, and for a stacked one whose patches conflict (it failed stack-conflict).
	StackBase string `json:"stack_base,omitempty"`

	// Net is what the dispatch's egress proxy saw: connections by host:port, reached and
	// refused, and bytes each way. nil without the proxy or when nothing connected.
	Net *proxy.Stats `json:"net,omitempty"`

	// RuntimeBinary is the host-installed agent CLI the sandbox ran (path, version, sha256),
	// nil when the runtime ran none from the host.
	RuntimeBinary *wire.RuntimeBinary `json:"runtime_binary,omitempty"`
	// WorkerBinary is the worker program the sandbox ran: its path there, the pinned copy on
	// the host the sandbox bound, its build and its sha256. Nil for a kubernetes target (the
	// pod runs its image's) and for dispatches recorded by an agora that did not record it.
	WorkerBinary *wire.RuntimeBinary `json:"worker_binary,omitempty"`
	// WorkerImage is the image, REF@sha256:<hex>, a kubernetes target's pod ran its worker
	// from (no host binary is bound there); "" for every other dispatch.
	WorkerImage string `json:"worker_image,omitempty"`

	// Budget is the dispatch's effective budget; nil when none was set.
	Budget *budget.Budget `json:"budget,omitempty"`
	// Usage is what the dispatch's model calls used, counted by the gateway; nil for a
	// dispatch without one (or not ended yet).
	Usage *budget.Usage `json:"usage,omitempty"`
	// Phase is "awaiting_approval" ([PhaseAwaitingApproval]) while a call of the live
	// dispatch is held for a person's approval, and "" otherwise.
	Phase string `json:"phase,omitempty"`
	// TraceID is the trace the dispatch's spans belong to (32 hex digits), "" without one.
	// TraceSpan is the dispatch span's id and TraceParent the traceparent of its parent.
	TraceID     string `json:"trace_id,omitempty"`
	TraceSpan   string `json:"-"`
	TraceParent string `json:"-"`
	// Approvals are the dispatch's held calls in order, pending and decided.
	Approvals []Approval `json:"approvals,omitempty"`

	// RunID and TaskID name the run and task whose attempt this is ("" for a dispatch a
	// person or an MCP client started): a run's attempt is answered through its run.
	RunID  string `json:"run_id,omitempty"`
	TaskID string `json:"task_id,omitempty"`
	// ChildID is the dispatch that answers this one's question (state answered), AnsweredBy
	// who answered it and AnsweredAt when. A question is answered once; a later answer is
	// refused naming these ([AnsweredError]).
	ChildID    string     `json:"child_id,omitempty"`
	AnsweredBy string     `json:"answered_by,omitempty"`
	AnsweredAt *time.Time `json:"answered_at,omitempty"`

	// Verify is the dispatch's verify gate (its timeout resolved), nil for none; Verdict is
	// what agora observed running it, recorded with the terminal state, nil when the
	// dispatch had no gate or ended before it (failed, needs_input, cancelled).
	Verify  *verdict.Spec    `json:"verify,omitempty"`
	Verdict *verdict.Verdict `json:"verdict,omitempty"`

	// Learn marks a learn dispatch (docs/learn.md): what its grant would refuse was recorded
	// as *.would_deny instead of refused. Its patch feeds no hand-off or branch without
	// --include-learn.
	Learn bool `json:"learn,omitempty"`

	supervisor      string
	cancelRequested bool
	// wouldDeny, on a learn dispatch being accepted, is the tool.would_deny entry of its exec
	// command, written in the accept's transaction.
	wouldDeny map[string]any
	// answer is set on a child being accepted: who answers its parent, and the answer's hash.
	answer *answerNote
}

// Duration marshals as a Go duration string ("30m0s").
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	*d = Duration(v)
	return err
}

// Result holds what a finished dispatch left behind: content-addressed refs, never content.
type Result struct {
	Patch   *Artifact `json:"patch,omitempty"`
	Outputs []Output  `json:"outputs"`
	Stdout  *Artifact `json:"stdout,omitempty"`
	Stderr  *Artifact `json:"stderr,omitempty"`
	// Transcript is the model runtimes' JSON Lines transcript (openai, claude-code), redacted.
	Transcript *Artifact `json:"transcript,omitempty"`
	// Final is the model's final answer (outputs/final.md), redacted, kept only when the
	// worker vouched for it: taken from the model over a channel no process of the agent can
	// write, and written after every such process was stopped (wire.Result.Final). A review
	// is read from here and nowhere else.
	Final      *Artifact   `json:"final,omitempty"`
	Truncated  []string    `json:"truncated,omitempty"` // "stdout", "stderr" when capped
	NeedsInput *NeedsInput `json:"needs_input,omitempty"`
	Phases     []Phase     `json:"phases,omitempty"`
}

// Artifact is a stored blob.
type Artifact struct {
	Digest digest.Digest `json:"digest"`
	Size   int64         `json:"size"`
}

// Output is one file the agent left in /agora/out/outputs.
type Output struct {
	Path   string        `json:"path"`
	Digest digest.Digest `json:"digest"`
	Size   int64         `json:"size"`
}

// Input is an upstream product mounted read-only into the sandbox at /agora/inputs/<Key>.
type Input struct {
	Key          string      `json:"key"`
	Select       string      `json:"select"` // patch | outputs | output:PATH
	FromDispatch string      `json:"from_dispatch"`
	Files        []InputFile `json:"files"`
	// Dir, when set, places the files under /agora/inputs/<Key>/<Dir>/ (see [InputSpec]).
	Dir string `json:"dir,omitempty"`
	// Apply: the worker applied this patch to the workspace before the agent (see
	// [InputSpec]).
	Apply bool `json:"apply,omitempty"`
	// Stack: this patch is part of the dispatch's stacked base (see [InputSpec]).
	Stack bool `json:"stack,omitempty"`
}

// InputFile is one file of an input, relative to /agora/inputs/<Key> (and its Dir).
type InputFile struct {
	Path   string        `json:"path"`
	Digest digest.Digest `json:"digest"`
	Size   int64         `json:"size"`
}

// NeedsInput is the agent's question.
type NeedsInput struct {
	Question     string          `json:"question"`
	Options      []string        `json:"options,omitempty"`
	PartialState json.RawMessage `json:"partial_state,omitempty"`
}

// Phase is one timed step of the worker.
type Phase struct {
	Name string `json:"name"`
	OK   bool   `json:"ok"`
	MS   int64  `json:"ms"`
}

// Event is one lifecycle event.
type Event struct {
	Seq  int            `json:"seq"`
	Kind string         `json:"kind"`
	At   time.Time      `json:"at"`
	Data map[string]any `json:"data,omitempty"`
}

// ErrNotFound means no dispatch has the id.
var ErrNotFound = errors.New("dispatch not found")

// ErrClaimed means another live process supervises the dispatch, or it already started.
var ErrClaimed = errors.New("dispatch is supervised elsewhere")

// ErrExists means a dispatch with the requested id is already recorded.
var ErrExists = errors.New("dispatch already recorded")

const recordColumns = `id, state, reason, detail, exit_code, subagent, subagent_digest, envs, target, sandbox,
network, input_digest, repo, revision, timeout_ms, parent_id, actor, provider_task_id, supervisor,
cancel_requested, callback_url, created_at, started_at, ended_at, isolation, result, inputs, grants, workspace, net,
runtime_binary, budget, usage, trace_id, trace_span, trace_parent, run_id, task_id, child_id, answered_by, answered_at, verify, verdict,
worker_binary, worker_image, learn, stack_base`

type scanner interface{ Scan(...any) error }

func scanRecord(row scanner) (*Record, error) {
	var r Record
	var exit sql.NullInt64
	var envs, created, started, ended, result, inputs, grants, netStats, runtimeBin, budgetJSON, usageJSON, answeredAt, verifyJSON, verdictJSON, workerBin string
	var timeoutMS int64
	if err := row.Scan(&r.ID, &r.State, &r.Reason, &r.Detail, &exit, &r.Subagent, &r.SubagentDigest, &envs,
		&r.Target, &r.Sandbox, &r.Network, &r.InputDigest, &r.Repo, &r.Revision, &timeoutMS, &r.ParentID,
		&r.Actor, &r.ProviderTaskID, &r.supervisor, &r.cancelRequested, &r.CallbackURL, &created, &started,
		&ended, &r.Isolation, &result, &inputs, &grants, &r.Workspace, &netStats,
		&runtimeBin, &budgetJSON, &usageJSON, &r.TraceID, &r.TraceSpan, &r.TraceParent,
		&r.RunID, &r.TaskID, &r.ChildID, &r.AnsweredBy, &answeredAt, &verifyJSON, &verdictJSON, &workerBin, &r.WorkerImage, &r.Learn, &r.StackBase); err != nil {
		return nil, err
	}
	if exit.Valid {
		c := int(exit.Int64)
		r.ExitCode = &c
	}
	r.Timeout = Duration(time.Duration(timeoutMS) * time.Millisecond)
	if err := json.Unmarshal([]byte(envs), &r.Envs); err != nil {
		return nil, fmt.Errorf("dispatch %s: bad envs: %w", r.ID, err)
	}
	if inputs != "" && inputs != "[]" {
		if err := json.Unmarshal([]byte(inputs), &r.Inputs); err != nil {
			return nil, fmt.Errorf("dispatch %s: bad inputs: %w", r.ID, err)
		}
	}
	if netStats != "" {
		r.Net = &proxy.Stats{}
		if err := json.Unmarshal([]byte(netStats), r.Net); err != nil {
			return nil, fmt.Errorf("dispatch %s: bad net: %w", r.ID, err)
		}
	}
	if budgetJSON != "" {
		r.Budget = &budget.Budget{}
		if err := json.Unmarshal([]byte(budgetJSON), r.Budget); err != nil {
			return nil, fmt.Errorf("dispatch %s: bad budget: %w", r.ID, err)
		}
	}
	if usageJSON != "" {
		r.Usage = &budget.Usage{}
		if err := json.Unmarshal([]byte(usageJSON), r.Usage); err != nil {
			return nil, fmt.Errorf("dispatch %s: bad usage: %w", r.ID, err)
		}
	}
	if runtimeBin != "" {
		r.RuntimeBinary = &wire.RuntimeBinary{}
		if err := json.Unmarshal([]byte(runtimeBin), r.RuntimeBinary); err != nil {
			return nil, fmt.Errorf("dispatch %s: bad runtime_binary: %w", r.ID, err)
		}
	}
	if workerBin != "" {
		r.WorkerBinary = &wire.RuntimeBinary{}
		if err := json.Unmarshal([]byte(workerBin), r.WorkerBinary); err != nil {
			return nil, fmt.Errorf("dispatch %s: bad worker_binary: %w", r.ID, err)
		}
	}
	if grants != "" {
		r.Grants = &grant.Set{}
		if err := json.Unmarshal([]byte(grants), r.Grants); err != nil {
			return nil, fmt.Errorf("dispatch %s: bad grants: %w", r.ID, err)
		}
	}
	if verifyJSON != "" {
		s, err := verdict.ParseSpec([]byte(verifyJSON))
		if err != nil {
			return nil, fmt.Errorf("dispatch %s: bad verify: %w", r.ID, err)
		}
		r.Verify = &s
	}
	if verdictJSON != "" {
		v, err := verdict.Parse([]byte(verdictJSON))
		if err != nil {
			return nil, fmt.Errorf("dispatch %s: bad verdict: %w", r.ID, err)
		}
		r.Verdict = &v
	}
	var err error
	if r.CreatedAt, err = time.Parse(time.RFC3339Nano, created); err != nil {
		return nil, fmt.Errorf("dispatch %s: bad time: %w", r.ID, err)
	}
	r.StartedAt, r.EndedAt, r.AnsweredAt = parseOptTime(started), parseOptTime(ended), parseOptTime(answeredAt)
	if result != "" {
		r.Result = &Result{}
		if err := json.Unmarshal([]byte(result), r.Result); err != nil {
			return nil, fmt.Errorf("dispatch %s: bad result: %w", r.ID, err)
		}
	}
	return &r, nil
}

func parseOptTime(s string) *time.Time {
	if s == "" {
		return nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return nil
	}
	return &t
}

type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func getRecord(ctx context.Context, q queryer, id string) (*Record, error) {
	r, err := scanRecord(q.QueryRowContext(ctx, `SELECT `+recordColumns+` FROM dispatches WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errclass.NotFoundf(ErrNotFound, "dispatch", id)
	}
	if err != nil {
		return nil, err
	}
	rows, err := q.QueryContext(ctx, `SELECT seq, kind, at, data FROM dispatch_events WHERE dispatch_id = ? ORDER BY seq`, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	r.Events = []Event{}
	for rows.Next() {
		var e Event
		var at, data string
		if err := rows.Scan(&e.Seq, &e.Kind, &at, &data); err != nil {
			return nil, err
		}
		e.At, _ = time.Parse(time.RFC3339Nano, at)
		if err := json.Unmarshal([]byte(data), &e.Data); err != nil {
			return nil, err
		}
		r.Events = append(r.Events, e)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows.Close()
	if err := loadApprovals(ctx, q, r); err != nil {
		return nil, err
	}
	return r, nil
}

// ListFilter narrows [Store.List].
type ListFilter struct {
	State string // "" for all
	Limit int    // 0 for 100
}

func listRecords(ctx context.Context, q queryer, f ListFilter) ([]*Record, error) {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	where, args := "", []any{}
	if f.State != "" {
		where = "WHERE state = ?"
		args = append(args, f.State)
	}
	args = append(args, f.Limit)
	rows, err := q.QueryContext(ctx, `SELECT `+recordColumns+` FROM dispatches `+where+` ORDER BY created_at DESC, id DESC LIMIT ?`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []*Record{}
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, err
		}
		r.Events = []Event{}
		out = append(out, r)
	}
	return out, rows.Err()
}

// CheckState validates a --state filter.
func CheckState(s string) error {
	if s == "" {
		return nil
	}
	states := lifecycle.DispatchStates()
	if slices.Contains(states, s) {
		return nil
	}
	return fmt.Errorf("unknown state %q; states: %s", s, strings.Join(states, ", "))
}
