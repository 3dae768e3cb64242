// Package plan owns the orchestrator's plan format: a DAG of tasks written in YAML or JSON (one
// schema, documented in docs/plan.md). It decodes a plan strictly, validates it structurally
// (reporting every problem at once with its file, line and path), gives it one canonical JSON
// form and digest, resolves defaults into per-task settings, and holds the retry policy
// (backoff with full jitter and which failure reasons are retryable).
//
// Plans are untrusted input: an AI orchestrator may write them. Everything is size-capped by
// the exported limits below, and validation needs no recursion over the task graph, so a plan
// of [MaxTasks] tasks is checked in linear time.
//
// The package is pure and runs on the host side (agora orch serve and agora orch validate). It
// never opens the catalog, the database or a sandbox: catalog references are checked only
// through the [Refs] a caller passes to [Plan.Check]. It never decides when a task runs; the
// engine does.
package plan

import (
	"encoding/json"
	"time"

	"github.com/agora-dev/agora/internal/budget"
	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/strictyaml"
	"github.com/agora-dev/agora/internal/verdict"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// Version is the only plan format version this package reads.
const Version = 1

// MaxInputSize caps one task's input in canonical JSON: the one input limit of every way a
// dispatch is made (the CLI, MCP, plans), since the input reaches the agent as one
// environment string.
const MaxInputSize = wire.MaxInputJSON

// Limits on a plan. A plan larger than these is refused, not truncated.
const (
	MaxSourceSize      = 16 << 20       // bytes of YAML or JSON
	MaxTasks           = 100_000        // tasks in one plan
	MaxDependsOn       = 64             // entries in one task's depends_on (and in its base)
	MaxNeeds           = 64             // entries in one task's needs
	MaxLocks           = 64             // entries in one task's locks
	MaxGrantItems      = 64             // entries in each list of one task's grants
	MaxEnvs            = 16             // env bundles in one task's (or the defaults') env
	MaxOutputPath      = 1024           // bytes of the PATH in select: output:PATH
	MaxConcurrency     = 1024           // the largest concurrency a plan may ask for
	MaxTimeout         = 24 * time.Hour // the longest task timeout
	MaxRetryBackoff    = 24 * time.Hour // the longest initial_backoff or max_backoff
	MaxRetryAttempts   = 100            // the largest retry.max_attempts
	MaxRetryMultiplier = 10.0           // the largest retry.multiplier
	MaxErrors          = 100            // problems listed; the rest are counted ("and N more")
	DefaultConcurrency = 4              // concurrency when the plan names none
)

// DefaultQueue is the queue of a plan that names none. It always exists: agora.yaml declares
// it implicitly when it does not itself.
const DefaultQueue = "default"

// Lock modes.
const (
	LockExclusive = "exclusive" // excludes every other holder
	LockShared    = "shared"    // coexists with other shared holders
)

// Select forms of a [Need]. An output:PATH select is [SelectOutputPrefix] followed by a clean
// relative path in the upstream task's outputs.
const (
	SelectPatch        = "patch"   // the upstream patch, mounted as /agora/inputs/<key>/patch.diff
	SelectOutputs      = "outputs" // the upstream outputs tree, mounted under /agora/inputs/<key>/
	SelectOutputPrefix = "output:" // one upstream output file, mounted as /agora/inputs/<key>/<basename>
	// SelectVerify is the upstream attempt's verify gate verdict, as the host recorded it:
	// /agora/inputs/<key>/verify.json (the verdict, RFC 8785) and output.txt (the end of the
	// command's output it kept, redacted). The upstream task must have a verify gate.
	SelectVerify = "verify"
)

// Plan is a decoded, structurally valid plan. Parse normalises it: Concurrency is set, empty
// lists and blocks are nil, bare lock names are expanded and Input is canonical JSON.
type Plan struct {
	Version     int
	Name        string
	Concurrency int // tasks of this run running at once, 1 to MaxConcurrency
	Defaults    Defaults
	// Workspace names the catalog workspace every task works on, pinned at submit to one
	// commit of Revision ("" means the workspace's default). "" means none: the tasks get
	// an empty workspace, or the repository the submitter names (CLI only).
	Workspace string
	Revision  string
	// Queue is the agora.yaml queue the run's tasks take their slots from, together with
	// every other run on it; "" is [DefaultQueue] (named or not: see [Plan.QueueName]).
	Queue string
	Tasks []Task
	// Budget is the run's budget, shared by all its tasks' attempts: a task is not fired
	// once the run has spent it. Zero sets none.
	Budget budget.Budget

	pos *strictyaml.Positions // where each path came from, for Check's messages
}

// Defaults apply to every task that does not set the field itself.
type Defaults struct {
	Target  string        // "" means the target agora.yaml names as default
	Env     []string      // env bundle references, NAME or NAME@sha256:HEX
	Timeout time.Duration // 0 means the target's own timeout
	Retry   *Retry        // nil means the built-in policy (see [DefaultRetry])
	// Verify is the verify gate every task takes unless it sets its own; nil: none.
	Verify *verdict.Spec
}

// Task is one node of the plan's graph. A plan of [MaxTasks] tasks holds one each while its
// documents are still decoded, so the fields few tasks set sit behind one pointer ([TaskRare]):
// a Task is 152 bytes, not 264. Read them through the methods of the same name, which are
// nil-safe: a Task built without a TaskRare sets none of them.
type Task struct {
	ID        string
	Subagent  string          // NAME or NAME@sha256:HEX
	Target    string          // "" means Defaults.Target
	Env       []string        // nil inherits Defaults.Env; non-nil and empty means none
	Input     json.RawMessage // a JSON object in RFC 8785 canonical form, or nil
	DependsOn []string
	Locks     []Lock
	// Rare holds the fields few tasks set; nil sets none of them.
	Rare *TaskRare
}

// TaskRare is the part of a [Task] that few tasks set: most take their retry policy and
// timeout from the plan's defaults and set none of the rest.
type TaskRare struct {
	Retry   *Retry        // fields set here override Defaults.Retry field by field
	Timeout time.Duration // 0 means Defaults.Timeout
	// Base stacks the task on upstream work: its workspace starts from the run's commit with
	// the approved patch of each base task applied (theirs first: a base's own bases come
	// before it, transitively, each once), and its own patch is taken against that. Each
	// entry implies the edge base -> this task. See docs/plan.md, "Stacked tasks".
	Base  []string
	Needs map[string]Need // input key -> upstream product
	// Grants narrows the task's grant below its subagent's (the union of its capabilities');
	// nil keeps the subagent's grant. Each list given replaces that part with a subset of it
	// (tools by name, command patterns each equal to a granted one, hosts each covered by a
	// granted one); a nil list keeps that part whole, an empty one grants none of it. A list
	// that widens the grant makes the task's dispatch fail as denied: the catalog, not a
	// plan, decides what a role may do.
	Grants *grant.Set
	// Budget narrows each attempt's budget (never above the plan's, the subagent's or the
	// target's). Zero fields take the tightest ceiling.
	Budget budget.Budget
	// Verify is the task's verify gate, replacing Defaults.Verify whole; nil inherits it.
	// After the agent, agora runs its command in a fresh sandbox on the base tree plus the
	// attempt's patch; a red verdict fails the attempt verify-failed.
	Verify *verdict.Spec
	// FanOut makes the task a group: it runs nothing itself, and when FanOut.From succeeds
	// the engine adds one task per item of its list (see [FanOut]). Every other field of a
	// fan-out task is empty; its template holds them.
	FanOut *FanOut
	// Review and OnFail are the task's review quorum and fix loop ([Review], [OnFail]).
	Review *Review
	OnFail *OnFail
	// Learn makes the task's dispatches learn dispatches (docs/learn.md): what the grant
	// would refuse is recorded instead of refused, inside the same sandbox. A person's
	// decision: a run an MCP client submits may not have a learn task, and a learn task's
	// products feed no other task (no needs, fan-out, review or fix takes them).
	Learn bool
}

func (r *TaskRare) isZero() bool {
	return r.Retry == nil && r.Timeout == 0 && !r.Learn && r.Base == nil && r.Needs == nil && r.Grants == nil && r.Budget.IsZero() && r.Verify == nil &&
		r.FanOut == nil && r.Review == nil && r.OnFail == nil
}

// rare is t's TaskRare for writing, made when t has none.
func (t *Task) rare() *TaskRare {
	if t.Rare == nil {
		t.Rare = &TaskRare{}
	}
	return t.Rare
}

// The accessors of [TaskRare]'s fields: each is the zero value on a task without one.

func (t *Task) Retry() *Retry {
	if t.Rare == nil {
		return nil
	}
	return t.Rare.Retry
}

func (t *Task) Timeout() time.Duration {
	if t.Rare == nil {
		return 0
	}
	return t.Rare.Timeout
}

func (t *Task) Learn() bool {
	return t.Rare != nil && t.Rare.Learn
}

func (t *Task) Base() []string {
	if t.Rare == nil {
		return nil
	}
	return t.Rare.Base
}

func (t *Task) Needs() map[string]Need {
	if t.Rare == nil {
		return nil
	}
	return t.Rare.Needs
}

func (t *Task) Grants() *grant.Set {
	if t.Rare == nil {
		return nil
	}
	return t.Rare.Grants
}

func (t *Task) Budget() budget.Budget {
	if t.Rare == nil {
		return budget.Budget{}
	}
	return t.Rare.Budget
}

func (t *Task) Verify() *verdict.Spec {
	if t.Rare == nil {
		return nil
	}
	return t.Rare.Verify
}

func (t *Task) FanOut() *FanOut {
	if t.Rare == nil {
		return nil
	}
	return t.Rare.FanOut
}

func (t *Task) Review() *Review {
	if t.Rare == nil {
		return nil
	}
	return t.Rare.Review
}

func (t *Task) OnFail() *OnFail {
	if t.Rare == nil {
		return nil
	}
	return t.Rare.OnFail
}

// Need hands an upstream task's product to a task, mounted read-only at /agora/inputs/<key>.
// It implies the edge From -> this task.
type Need struct {
	From   string // the upstream task id
	Select string // SelectPatch, SelectOutputs or "output:PATH"
}

// Lock is a named resource a task holds while it runs. Locks are global across runs.
type Lock struct {
	Name string
	Mode string // LockExclusive or LockShared
}

// Retry is a retry policy. In a plan a zero field (nil for OnWorkerFailed) is unset and
// inherits; [Resolved] tasks carry an effective policy with every field set.
type Retry struct {
	MaxAttempts    int // attempts in all, 1 = no retry
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
	Multiplier     float64
	OnWorkerFailed *bool // retry a worker-failed attempt; nil means true
}
