package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/verdict"
)

// Catalog lists the latest active version of every catalog entry of a kind, sorted by name. The
// catalog's read side (package registry's Reader) satisfies it; the server is never handed
// anything that can write.
type Catalog interface {
	List(ctx context.Context, kind catalog.Kind) ([]catalog.Version, error)
}

// DispatchRequest is everything a dispatch over MCP may choose: catalog references, a target,
// an input and a timeout. The port MUST NOT add a repository, callback, image, secret reference
// or sandbox setting on the caller's behalf.
type DispatchRequest struct {
	Subagent string          // NAME or NAME@sha256:HEX
	Envs     []string        // env bundle references, applied in order
	Target   string          // "" is the default target
	Input    json.RawMessage // one JSON object; nil is {}
	Timeout  time.Duration   // 0 is the target's timeout
	Actor    string          // "mcp:" + the client's name

	// Workspace names a workspace people registered (NAME or NAME@sha256:HEX), "" for an empty
	// directory; Revision is a branch, tag or commit id it allows ("" is its default). The port
	// resolves them; the server never sees the repository's path.
	Workspace string
	Revision  string
}

// Dispatcher is the run-time dispatch port.
//
// Dispatch records the dispatch and hands it to a supervisor that outlives the MCP session (a
// detached process), then returns the record once the worker has started or the dispatch has
// already ended (a denial ends it at once). Get and Cancel work on any dispatch, whoever
// started it, except as Resume says. A request the dispatcher refuses MUST come back as a
// [*RequestError]; an unknown id as an error matching [ErrNotFound].
//
// Resume answers, for client p (recorded as "mcp:" + its name, with its ceiling), the question
// of a dispatch in needs_input: it starts the linked child exactly like `agora dispatch
// resume`, and MUST refuse (audited, as a [*RequestError]) what p could not have dispatched
// itself (a dispatch on a repository path a person gave, a run's attempt) and a question that
// was answered already, naming that answer. Get MUST refuse a dispatch no MCP client could
// have started (on such a repository path) the same way, and Cancel also a run's attempt.
// Content returns stored content by its digest, checked against
// it, refusing (with an error) more than max bytes: the server asks only for digests a
// Record it was given names.
type Dispatcher interface {
	Dispatch(ctx context.Context, req DispatchRequest) (*Record, error)
	Get(ctx context.Context, id string) (*Record, error)
	Cancel(ctx context.Context, id string) (*Record, error)
	Resume(ctx context.Context, p Principal, id, answer string) (*Record, error)
	Content(ctx context.Context, digest string, max int64) ([]byte, error)
}

// EndSignal is what a [Dispatcher] may also do: hand out, for a dispatch it started, a
// channel closed when its supervisor says the end is committed (or exits). The shared poll of
// a waited-on dispatch reads the record at once then instead of at its next interval (a
// no-op's agora_dispatch answered at the first 50 ms poll after its end). nil for a dispatch
// it knows nothing of; the poll goes on either way, so a signal never replaces the reads.
type EndSignal interface {
	Ended(id string) <-chan struct{}
}

// Orchestrator is the orchestrator service port (agora orch serve). Results are the service's
// own JSON documents, passed through as structured content. A nil Orchestrator in [Config]
// makes the orchestrator tools answer [ErrOrchestratorDown].
type Orchestrator interface {
	// Submit starts a run of plan, or returns the run of the same identity; newRun starts a
	// new run even then.
	Submit(ctx context.Context, actor string, plan json.RawMessage, newRun bool) (json.RawMessage, error)
	Status(ctx context.Context, runID string) (json.RawMessage, error)
	Watch(ctx context.Context, runID string, timeout time.Duration) (json.RawMessage, error)
	// Schedules and Schedule read the standing orders people added on the host (agora orch
	// schedule add); nothing over MCP adds, changes or removes one.
	Schedules(ctx context.Context) (json.RawMessage, error)
	Schedule(ctx context.Context, name string) (json.RawMessage, error)
}

// AuditEntry is one entry for the audit log. Details hold names, decisions and hashes only.
type AuditEntry struct {
	Actor   string
	Kind    string // entry.MCPToolCall or entry.MCPToolDenied
	Subject string // "mcp/" + the tool's name
	Details map[string]any
}

// AuditFunc appends e to the audit log and returns once it is durable. A call whose entry
// cannot be written is refused.
type AuditFunc func(ctx context.Context, e AuditEntry) error

// ErrNotFound matches a dispatch id (or run id) that does not exist.
var ErrNotFound = errors.New("not found")

// ErrOrchestratorDown is what the orchestrator tools answer while no orchestrator runs.
var ErrOrchestratorDown = errors.New("orchestrator not running: start it with `agora orch serve`")

// RequestError is a request the dispatcher or orchestrator refused before anything started:
// an unknown name, an unknown target, a timeout over the target's limit, an input that is not
// an object. Msg is shown to the caller after host paths and tokens are scrubbed from it.
type RequestError struct{ Msg string }

func (e *RequestError) Error() string { return e.Msg }

// Record is what a dispatch looks like over MCP: its state, what it ran (pinned by digest), and
// content-addressed refs to what it left behind. It carries no content, no repository path, no
// callback URL and no partial state: the adapter fills only these fields, and the server scrubs
// Detail before it leaves.
type Record struct {
	ID       string `json:"id"`
	State    string `json:"state"`
	Done     bool   `json:"done"` // the state is terminal
	Reason   string `json:"reason,omitempty"`
	Detail   string `json:"detail,omitempty"`
	ExitCode *int   `json:"exit_code,omitempty"`
	// Subagent is the subagent's name and SubagentDigest its version, apart, as `agora dispatch
	// describe -o json` shows them (was NAME@sha256:HEX in one string); Envs
	// likewise each {name, digest}.
	Subagent       string   `json:"subagent"`
	SubagentDigest string   `json:"subagent_digest"`
	Envs           []EnvRef `json:"envs"`
	Target         string   `json:"target"`
	Sandbox        string   `json:"sandbox"`
	Network        string   `json:"network"`
	Isolation      string   `json:"isolation,omitempty"`
	InputDigest    string   `json:"input_digest"`
	TimeoutSeconds int64    `json:"timeout_seconds"`
	ParentID       string   `json:"parent_id,omitempty"`
	// ChildID is the dispatch that answers this one's question, once one did (state
	// answered); AnsweredBy and AnsweredAt say who answered and when. A question is answered
	// once: a later answer is refused naming these.
	ChildID    string     `json:"child_id,omitempty"`
	AnsweredBy string     `json:"answered_by,omitempty"`
	AnsweredAt *time.Time `json:"answered_at,omitempty"`
	// RunID and TaskID name the run and task whose attempt this is: it is answered or
	// cancelled only through its run, on the host, never over MCP.
	RunID      string      `json:"run_id,omitempty"`
	TaskID     string      `json:"task_id,omitempty"`
	Actor      string      `json:"actor"`
	CreatedAt  time.Time   `json:"created_at"`
	StartedAt  *time.Time  `json:"started_at,omitempty"`
	EndedAt    *time.Time  `json:"ended_at,omitempty"`
	Patch      *Artifact   `json:"patch,omitempty"`
	Outputs    []Output    `json:"outputs"`
	Stdout     *Artifact   `json:"stdout,omitempty"`
	Stderr     *Artifact   `json:"stderr,omitempty"`
	Transcript *Artifact   `json:"transcript,omitempty"`
	Truncated  []string    `json:"truncated,omitempty"`
	NeedsInput *NeedsInput `json:"needs_input,omitempty"`
	Events     []Event     `json:"events"`

	// Workspace is the workspace version the dispatch works on (NAME@sha256:HEX) and Revision
	// the commit it resolved to; the repository's path is never part of a Record.
	Workspace string `json:"workspace,omitempty"`
	Revision  string `json:"revision,omitempty"`

	// Net is what the dispatch's egress proxy saw, once it ended: hosts reached and refused.
	Net *Net `json:"net,omitempty"`

	// Budget is the dispatch's effective budget, and Usage what its model calls used (tokens,
	// calls, cost at agora.yaml's prices) once it ended.
	Budget *Budget `json:"budget,omitempty"`
	Usage  *Usage  `json:"usage,omitempty"`

	// Phase is "awaiting_approval" while a call of the dispatch is held for a person's
	// approval. A person decides it on the host's CLI (agora dispatch approve/deny); no MCP
	// tool can.
	Phase string `json:"phase,omitempty"`
	// Learn marks a learn dispatch a person started (docs/learn.md): what its grant would
	// refuse was recorded, not refused. An MCP client can see one, never start one.
	Learn bool `json:"learn,omitempty"`
	// AwaitingApproval are the calls held now: the tool and a redacted preview.
	AwaitingApproval []HeldCall `json:"awaiting_approval,omitempty"`

	// Verify is the dispatch's verify gate, and Verdict what agora observed running it in a
	// fresh sandbox once the agent finished: exit status, duration, the last 16 KiB of output
	// (redacted; host paths masked here, output_sha256 is of the tail as recorded), the
	// protected paths a patch touched or those outside its changes, and the counts of the
	// JUnit report a gate with expect read. A red verdict ends the dispatch failed/verify-failed.
	Verify  *verdict.Spec    `json:"verify,omitempty"`
	Verdict *verdict.Verdict `json:"verdict,omitempty"`
}

// EnvRef is an env bundle a dispatch applied: its name and version digest.
type EnvRef struct {
	Name   string `json:"name"`
	Digest string `json:"digest"`
}

// Budget is a dispatch's spending limit; a zero field sets none.
type Budget struct {
	Tokens     int64   `json:"tokens,omitempty"`
	USD        float64 `json:"usd,omitempty"`
	ModelCalls int64   `json:"model_calls,omitempty"`
}

// Usage is what a dispatch's model calls used.
type Usage struct {
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	CachedTokens int64   `json:"cached_tokens"`
	ModelCalls   int64   `json:"model_calls"`
	CostUSD      float64 `json:"cost_usd"`
}

// HeldCall is a call held for a person's approval: what `agora dispatch approval list`
// shows of it. Preview shows the fields that say what the call acts on first and whole, and
// ends a cut with "[… N more bytes not shown]" markers; ArgsBytes is the size of the whole
// arguments, which a person reads on the host (`agora dispatch approval show`).
type HeldCall struct {
	CallID     string    `json:"call_id"`
	Tool       string    `json:"tool"`
	Rule       string    `json:"rule"`
	ArgsDigest string    `json:"args_digest"`
	ArgsBytes  int       `json:"args_bytes"`
	Preview    string    `json:"preview"`
	ExpiresAt  time.Time `json:"expires_at"`
}

// Net counts a dispatch's connections through its egress proxy by host:port, and its bytes.
type Net struct {
	Reached   map[string]int `json:"reached,omitempty"`
	Refused   map[string]int `json:"refused,omitempty"`
	BytesUp   int64          `json:"bytes_up"`
	BytesDown int64          `json:"bytes_down"`
}

// Artifact is a stored blob: its digest and size, never its bytes.
type Artifact struct {
	Digest string `json:"digest"`
	Size   int64  `json:"size"`
}

// Output is one file the worker left in its outputs directory (a path relative to it).
type Output struct {
	Path   string `json:"path"`
	Digest string `json:"digest"`
	Size   int64  `json:"size"`
}

// NeedsInput is the worker's question and the answers it offered.
type NeedsInput struct {
	Question string   `json:"question"`
	Options  []string `json:"options,omitempty"`
}

// Event is one lifecycle event: its kind and when it happened.
type Event struct {
	Kind string    `json:"kind"`
	At   time.Time `json:"at"`
}

// Final reports whether r will never change again: it ended, and not in needs_input (which an
// answer moves to answered).
func (r *Record) Final() bool { return r.Done && r.State != lifecycle.DispatchNeedsInput }

// public returns a copy of r fit to send: Detail scrubbed, lists never null.
func (s *Server) public(r *Record) *Record {
	c := *r
	c.Detail = s.scrub(c.Detail)
	if c.Envs == nil {
		c.Envs = []EnvRef{}
	}
	if c.Outputs == nil {
		c.Outputs = []Output{}
	}
	if c.Events == nil {
		c.Events = []Event{}
	}
	if c.NeedsInput != nil {
		n := *c.NeedsInput
		n.Question = s.scrub(n.Question)
		c.NeedsInput = &n
	}
	if c.Verdict != nil {
		v := *c.Verdict
		v.Detail = s.scrub(v.Detail)
		c.Verdict = &v
	}
	return &c
}
