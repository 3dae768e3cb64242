// Package api holds the orchestrator service's wire types: what `agora orch serve` answers on
// its Unix socket and what its clients (the CLI, the MCP server) read, and the contract of a
// hand-off's taker ([Handoff]), which the CLI implements and the service calls. It is plain
// data with no behaviour, so a client imports it without importing the engine or any database
// code.
package api

import (
	"cmp"
	"fmt"
	"time"

	"github.com/agora-dev/agora/internal/budget"
	"github.com/agora-dev/agora/internal/verdict"
)

// Run is one plan instance. Its State is one of internal/lifecycle's run states and Counts
// counts its tasks by task state; a Task's State is a task state and its Reason a dispatch's
// reason or the orchestrator's own (lifecycle.TaskReasons).
type Run struct {
	ID          string         `json:"id"`
	Name        string         `json:"name"`
	State       string         `json:"state"`
	PlanDigest  string         `json:"plan_digest"`
	Actor       string         `json:"actor"`
	Concurrency int            `json:"concurrency"`
	Workspace   string         `json:"workspace,omitempty"` // name@sha256:HEX
	Repo        string         `json:"repo,omitempty"`
	Revision    string         `json:"revision,omitempty"`
	Counts      map[string]int `json:"counts"`
	Total       int            `json:"total"`
	CreatedAt   time.Time      `json:"created_at"`
	EndedAt     *time.Time     `json:"ended_at,omitempty"`
	Sealed      bool           `json:"sealed"`
	CancelAsked bool           `json:"cancel_requested,omitempty"`
	// NameRuns is set when the run was asked for by its name and more than one run has that
	// name: how many do (this one is the newest; an id names any of them).
	NameRuns int    `json:"name_runs,omitempty"`
	Tasks    []Task `json:"tasks,omitempty"`
	// Budget is the plan's run budget, and Usage what the run's ended attempts used
	// together; nil when there is none.
	Budget *budget.Budget `json:"budget,omitempty"`
	Usage  *budget.Usage  `json:"usage,omitempty"`
	// TraceID is the trace the run's spans belong to (32 hex digits), "" without one.
	TraceID string `json:"trace_id,omitempty"`
	// Queue is the queue its tasks take their slots from (its plan's queue:), and
	// QueueState that queue now (the service adds it; absent from a snapshot read without
	// serve).
	Queue      string `json:"queue"`
	QueueState *Queue `json:"queue_state,omitempty"`
	// Schedule is the schedule whose slot (Slot, when it was due) the run is for, "" for a
	// run submitted by hand; Missed is how many earlier slots of it got no run of their own
	// (serve was down) and were coalesced into this one.
	Schedule string     `json:"schedule,omitempty"`
	Slot     *time.Time `json:"slot,omitempty"`
	Missed   int        `json:"missed,omitempty"`
	// Next says what must happen for the run to move on when only a person can move it:
	// the exact `agora orch answer RUN TASK --answer TEXT` of each task that waits for an
	// answer. "" otherwise; set on a status read with its tasks.
	Next string `json:"next,omitempty"`
}

// Task is one node of a run.
type Task struct {
	ID        string   `json:"id"`
	State     string   `json:"state"`
	Subagent  string   `json:"subagent"`
	DependsOn []string `json:"depends_on,omitempty"` // depends_on, base and every needs.from
	// Base is the task's base list as its plan writes it (docs/plan.md, "Stacked tasks"): its
	// workspace started from these tasks' approved patches (and their own bases', first), and
	// its patch applies on top of theirs. A fix or a reviewer of a stacked task has its base.
	Base []string `json:"base,omitempty"`
	// Needs are the tasks whose products this one takes as inputs (its needs.*.from).
	Needs      []string `json:"needs,omitempty"`
	Locks      []string `json:"locks,omitempty"`
	Attempts   int      `json:"attempts"`
	DispatchID string   `json:"dispatch_id,omitempty"`
	Reason     string   `json:"reason,omitempty"`
	Detail     string   `json:"detail,omitempty"`
	Question   string   `json:"question,omitempty"`
	// Options are the answers the question offers, from the task's dispatch: readers that
	// show a run to whoever answers it (agora orch status and watch, and the MCP status and
	// watch tools) fill them in for a task in needs_input; the service does not store them.
	Options    []string   `json:"options,omitempty"`
	RetryAt    *time.Time `json:"retry_at,omitempty"`
	Dispatches []string   `json:"dispatches,omitempty"` // every attempt's dispatch id, oldest first
	// Verify is the task's verify gate, nil without one; Verdict is the verdict of its
	// latest attempt, nil until one is recorded.
	Verify  *verdict.Spec    `json:"verify,omitempty"`
	Verdict *verdict.Verdict `json:"verdict,omitempty"`
	// Product is set on a task that succeeded with a fix of its work: the fix's dispatch,
	// whose products (its patch holds the task's work and the fix) its dependents received.
	// "" means the task's own latest attempt.
	Product string `json:"product,omitempty"`
	// Added says why the engine added the task to the running run; nil for a task of the
	// plan.
	Added *Added `json:"added,omitempty"`
	// Review is a reviewer task's review of the work it judged, once it ended.
	Review *Review `json:"review,omitempty"`
	// Learn marks a learn task (docs/learn.md): its plan says learn: true, or (filled in by
	// readers that see its dispatch: orch status, the MCP run tools) its dispatch is a learn
	// dispatch, as on a target in mode: learn. Absent: not a learn task.
	Learn bool `json:"learn,omitempty"`
}

// ProductID is the dispatch whose products t's dependents receive.
func (t Task) ProductID() string {
	return cmp.Or(t.Product, t.DispatchID)
}

// Judging reports whether t was added to judge or fix another task's work (a reviewer or a
// fix): its work is not a result of the run of its own, but part of that task's.
func (t Task) Judging() bool {
	return t.Added != nil && (t.Added.Cause == "review" || t.Added.Cause == "fix")
}

// Added is why a task was added to a running run: Cause "fan_out" (an item of fan-out task
// Task), "review" (a reviewer of Task's work) or "fix" (a fix of Task's work).
type Added struct {
	Cause string `json:"cause"`
	Task  string `json:"task"`
}

// Review is what a reviewer concluded: its final answer as the host read it, or a rejection
// the host wrote when there was no final answer its worker vouched for or it was not the
// review object (Invalid).
type Review struct {
	Approve bool     `json:"approve"`
	Reasons []string `json:"reasons"`
	Invalid bool     `json:"invalid,omitempty"`
}

// Event is one change a watcher sees.
type Event struct {
	Seq    int64     `json:"seq"`
	At     time.Time `json:"at"`
	Run    string    `json:"run"`
	Task   string    `json:"task,omitempty"`
	Kind   string    `json:"kind"` // the audit kind: orch.task.fired, orch.run.ended, ...
	State  string    `json:"state"`
	Detail string    `json:"detail,omitempty"`
}

// SubmitRequest carries a plan's source, parsed and validated by the service.
type SubmitRequest struct {
	File   string `json:"file"` // names the plan in its problems; empty: a plan given as a value (MCP), placed by path only
	Source []byte `json:"source"`
	Repo   string `json:"repo,omitempty"` // an absolute path to a git repository; CLI only
	// Workspace names a catalog workspace (NAME or NAME@sha256:HEX) instead; the plan's own
	// workspace must agree with it.
	Workspace string `json:"workspace,omitempty"`
	Revision  string `json:"revision,omitempty"` // a revision of Repo or Workspace, pinned to a commit at submit
	Actor     string `json:"actor"`
	// NewRun starts a new run even when a run of the same name, plan, subagent versions and
	// checkout exists (which is returned otherwise, so a retried submission makes one run).
	NewRun bool `json:"new_run,omitempty"`
}

// SubmitResponse names the run: `agora orch submit -o json` and agora_orchestrator_submit
// both answer exactly this.
type SubmitResponse struct {
	Run Run `json:"run"`
	// Created is false when a run of the same identity (name, plan, the versions its bare
	// subagent names pin to, checkout) exists: that run is returned.
	Created bool `json:"created"`
	// Why says why a new run was started although a run of the same name, plan and checkout
	// exists: its subagents' versions changed, or a new run was asked for (new_run).
	Why string `json:"why,omitempty"`
	// Message says what happened in a sentence: a new run, or the existing one returned.
	Message string `json:"message"`
}

// SubmitMessage is the sentence of a SubmitResponse for run r: created, or returned as the
// run of the same identity; why is SubmitResponse.Why.
func SubmitMessage(r Run, created bool, why string) string {
	if !created {
		return fmt.Sprintf("the same plan, %s as run %s (%s, %s): returning it; a new run (new_run: true, agora orch submit --new-run) starts another",
			SameWhat(r), r.ID, r.Name, r.State)
	}
	msg := fmt.Sprintf("run %s (%s) is new: started with %d tasks", r.ID, r.Name, r.Total)
	if why != "" {
		msg += "; " + why
	}
	return msg
}

// SameWhat names what a run returned for a resubmission shares with it beside its plan.
func SameWhat(r Run) string {
	switch {
	case r.Workspace != "":
		return "subagents, workspace and commit"
	case r.Repo != "":
		return "subagents, repository and commit"
	}
	return "subagents and empty workspace"
}

// ActionRequest is cancel, answer, retry and seal.
type ActionRequest struct {
	Run    string `json:"run"`
	Task   string `json:"task,omitempty"`
	Answer string `json:"answer,omitempty"`
	Actor  string `json:"actor"`
}

// Error is every non-2xx answer.
type Error struct {
	Error string `json:"error"`
	Code  string `json:"code"` // not_found, invalid, conflict, unavailable, internal
	// Note says more about a not_found: for a run retention purged, when, by whom and why.
	Note string `json:"note,omitempty"`
}

// Patch is one task's patch reference, for `orch patches`.
type Patch struct {
	Task       string `json:"task"`
	DispatchID string `json:"dispatch_id"`
	Digest     string `json:"digest,omitempty"`
	// Base is a stacked task's stack: the tasks whose patches its own applies on top of, in
	// the order they apply (docs/plan.md, "Stacked tasks"); absent for a task on the run's
	// commit.
	Base []string `json:"base,omitempty"`
}

// Queue is one queue of agora.yaml (queues:) as the engine holds it now.
type Queue struct {
	Name string `json:"name"`
	// Concurrency is how many tasks of its runs may run at once, all runs together; 0 is
	// no limit.
	Concurrency int `json:"concurrency"`
	// Declared is false for a queue an open run names that agora.yaml no longer declares:
	// it runs at a concurrency of 1 until the queue is declared again.
	Declared bool `json:"declared"`
	Running  int  `json:"running"` // tasks of its runs running now
	// Depth is the ready tasks of its open runs: waiting for a slot of the queue, of their
	// run, or a lock.
	Depth int `json:"depth"`
	Runs  int `json:"runs"` // its open runs
}

// Queues is the service's answer listing its queues, sorted by name.
type Queues struct {
	Queues []Queue `json:"queues"`
}

// Health is the service's liveness answer with a snapshot of the engine.
type Health struct {
	PID          int `json:"pid"`
	OpenRuns     int `json:"open_runs"`
	LiveAttempts int `json:"live_attempts"`
	LocksHeld    int `json:"locks_held"`
	LockWaiters  int `json:"lock_waiters"`
	SlotWaiters  int `json:"slot_waiters"`
	Backoffs     int `json:"backoffs"`
}

// MCPActorPrefix starts the actor of everything an MCP client does: the MCP server submits
// as "mcp:" and the client's name, never a name the client chose. Learn is refused to it.
const MCPActorPrefix = "mcp:"
