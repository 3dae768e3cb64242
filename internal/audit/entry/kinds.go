package entry

// Kinds of the catalog (agora.db): a registration or retirement is "catalog.KIND.VERB"
// ([Catalog]); the two below are whole operations.
const (
	CatalogImport = "catalog.import" // agora import claude-agents: one entry per import
	CatalogApply  = "catalog.apply"  // agora apply: one entry per manifest applied
)

// Catalog is the kind of a catalog change: kind is a catalog kind ("capability",
// "subagent", "env", "workspace"), verb what happened to it ("register", "retire", ...).
func Catalog(kind, verb string) string { return "catalog." + kind + "." + verb }

// Kinds of a dispatch (agora.db). A dispatch's state change is "dispatch." + its state
// ([DispatchState]); the states that end a dispatch are also named here for readers.
const (
	DispatchPrefix          = "dispatch."
	DispatchAccepted        = DispatchPrefix + "accepted"
	DispatchStarted         = DispatchPrefix + "started"
	DispatchFinished        = DispatchPrefix + "finished"
	DispatchNeedsInput      = DispatchPrefix + "needs_input"
	DispatchFailed          = DispatchPrefix + "failed"
	DispatchCancelled       = DispatchPrefix + "cancelled"
	DispatchAnswered        = DispatchPrefix + "answered"
	DispatchVerified        = DispatchPrefix + "verified"         // the verify gate's verdict
	DispatchCancelRequested = DispatchPrefix + "cancel_requested" // a person's or program's cancel
	DispatchResumeRefused   = DispatchPrefix + "resume.refused"   // an answer the client could not give
	// DispatchAdopted: a supervisor host (`agora orch serve`) took over a started dispatch
	// whose supervisor died while its worker runs on (a Kubernetes Job). Details previous
	// (the dead supervisor), supervisor (the adopter) and role; written in the transaction
	// that makes the adopter the record's supervisor, before it follows the worker. A
	// supervisor whose Start found the dispatch's Job made already (its first supervisor died
	// between the Job and the start record) writes it with the start, with at_start true and
	// role supervisor.
	DispatchAdopted = DispatchPrefix + "adopted"
)

// DispatchState is the kind of a dispatch's move to state ("accepted", "finished", ...).
func DispatchState(state string) string { return DispatchPrefix + state }

// Kinds of a held tool call (agora.db): the request for approval and its decision.
const (
	ApprovalRequest  = "approval.request"
	ApprovalDecision = "approval.decision"
)

// Kinds the per-dispatch model gateway writes (agora.db), and the worker's tool decisions it
// records for it.
const (
	ToolPrefix = "tool."
	// ToolGateway is recorded once for every request the gateway serves, and for every
	// refusal that is not counted under ToolGatewayRefused.
	ToolGateway = "tool.gateway"
	// ToolGatewayRefused counts the refusals of one route and reason the sandbox can provoke.
	ToolGatewayRefused = "tool.gateway.refused"
	// ToolGatewayBudget is the gateway's last entry when the dispatch's audit budget is spent.
	ToolGatewayBudget = "tool.gateway.budget"
	// ToolCall is a tool decision the worker reports inside a sandbox (not an MCP call: see
	// [MCPToolCall]).
	ToolCall = "tool.call"
)

// Kinds the egress proxy writes (agora.db).
const (
	NetPrefix  = "net."
	NetConnect = "net.connect" // a connection decided: allow or deny, before its effect
	NetRequest = "net.request" // a request refused inside a connection the proxy reads
	NetClose   = "net.close"   // an allowed connection ended: bytes, duration, requests
)

// Kinds the MCP server writes (agora.db).
const (
	MCPToolPrefix     = "mcp.tool."
	MCPToolCall       = "mcp.tool.call"   // an MCP client's tool call, allowed or invalid
	MCPToolDenied     = "mcp.tool.denied" // an MCP client's tool call refused
	MCPResourceRead   = "mcp.resource.read"
	MCPResourceDenied = "mcp.resource.denied"
)

// Kinds of the orchestrator (orch.db): a run's and a task's transitions, and schedules.
const (
	OrchPrefix = "orch."

	RunSubmitted       = "orch.run.submitted"
	RunExtended        = "orch.run.extended"
	RunState           = "orch.run.state"
	RunEnded           = "orch.run.ended"
	RunSealRequested   = "orch.run.seal_requested"
	RunSealed          = "orch.run.sealed"
	RunCancelRequested = "orch.run.cancel_requested"

	TaskPrefix          = "orch.task."
	TaskReady           = "orch.task.ready"
	TaskFired           = "orch.task.fired"
	TaskSucceeded       = "orch.task.succeeded"
	TaskFailed          = "orch.task.failed"
	TaskCancelled       = "orch.task.cancelled"
	TaskNeedsInput      = "orch.task.needs_input"
	TaskRetryScheduled  = "orch.task.retry_scheduled"
	TaskSkipped         = "orch.task.skipped"
	TaskUnskipped       = "orch.task.unskipped"
	TaskVerified        = "orch.task.verified"
	TaskProduced        = "orch.task.produced"
	TaskReviewed        = "orch.task.reviewed"
	TaskRejected        = "orch.task.rejected"
	TaskAnswered        = "orch.task.answered"
	TaskRetried         = "orch.task.retried"
	TaskCancelRequested = "orch.task.cancel_requested"

	ScheduleAdded   = "orch.schedule.added"
	ScheduleRemoved = "orch.schedule.removed"
	ScheduleFired   = "orch.schedule.fired"
	ScheduleMissed  = "orch.schedule.missed"
	ScheduleRefused = "orch.schedule.refused"
	// ScheduleClockBack: the clock is earlier than the schedule's last slot (it was ahead
	// when that slot fired): its next slot is recomputed from now.
	ScheduleClockBack = "orch.schedule.clock_back"
)

// Kinds of a learn dispatch (agora.db; docs/learn.md). A learn dispatch runs with what its
// grant would refuse recorded instead of refused, inside the same sandbox and limits: each
// such action is one entry, written before the action proceeds, with the dispatch and role
// like the allowed entries beside it. Only a dispatch a person started in learn mode writes
// them; in any other dispatch the same action is refused and recorded as today (tool.call,
// net.connect, net.request with decision "denied"/"deny").
//
// Their details are a contract with `agora capability suggest` (read with [ReadWouldDeny]):
// the keys below never change meaning; a new key may be added.
const (
	// ToolWouldDeny: a tool or command the grant would refuse. Details: tool (the tool's
	// name), command (the command line, for a command tool: exec's command, Bash's command,
	// codex's shell command; secrets masked, at most [MaxWouldDenyCommand] bytes, "truncated":
	// true when cut), reason (why the grant would refuse it), role, dispatch.
	ToolWouldDeny = "tool.would_deny"
	// NetWouldDeny: a connection or request the grant would refuse and learn let through
	// (the host is in egress.learn_hosts). Details: host, port, method and path (when the
	// proxy sees the request; absent for a CONNECT it does not terminate), reason, role?.
	NetWouldDeny = "net.would_deny"
	// FileWouldDeny: a file written outside the workspace by the worker's own tools in a
	// learn dispatch; the write was made in a scratch directory in the sandbox instead.
	// Details: path (absolute as the sandbox names it, or relative to the workspace; never a
	// host path), op ("write", "edit", "delete", "move"), tool, reason, reporter (as on
	// [ToolWouldDeny]), role, dispatch, call_id when the runtime has one.
	FileWouldDeny = "file.would_deny"
)

// MaxWouldDenyCommand caps the command recorded in a [ToolWouldDeny] entry.
const MaxWouldDenyCommand = 2048

// WouldDeny reports whether kind is one of the learn kinds ([ToolWouldDeny], [NetWouldDeny],
// [FileWouldDeny]).
func WouldDeny(kind string) bool {
	switch kind {
	case ToolWouldDeny, NetWouldDeny, FileWouldDeny:
		return true
	}
	return false
}

// RetentionPurged records products of an ended dispatch purged by retention: subject
// the dispatch, details the products (name, digest, class, size), why, and the purger's role.
// It is written before the blobs are deleted, in the transaction that records the purge.
const RetentionPurged = "retention.purged"

// RetentionRunPurged records an ended, sealed orchestrator run whose rows retention removed
// from orch.db: subject run/<id>, details its plan's name and digest, state, end, task
// and attempt counts, why, and the purger's role; never the plan body. It is appended to
// orch.db's log in the transaction that deletes the rows, so neither exists without the other.
const RetentionRunPurged = "retention.run_purged"

// RetentionReplicaPruned records a generation of a database's replica deleted from the
// bucket under replicate.keep_generations: subject [Replica] (replica/DB/GENERATION),
// details db, generation, began, segments, kept (the whole generations kept, newest first),
// why and the pruner's role. It is committed to agora.db before the first segment is deleted.
const RetentionReplicaPruned = "retention.replica_pruned"

// RetentionReplicaLeft records a generation in this home's replica prefix that is not this
// home's (another home's agora.yaml names the same bucket and prefix), which a prune
// leaves: subject [Replica], details db, generation, claims (the identity its first segment's
// header names, not authenticated), why and the pruner's role. Recorded once per generation,
// by the first prune that leaves it.
const RetentionReplicaLeft = "retention.replica_left"

// The leader lease of `agora orch serve` (internal/lease). Actor "system", subject
// [Lease] (lease/NAMESPACE/NAME), details identity (this replica's holderIdentity) and, on
// [LeaderAcquired], previous (the holder it took over from, "" if none) and restored (the
// replica's databases were restored into the home first).
const (
	// LeaderAcquired is written once this replica holds the Lease, before it serves.
	LeaderAcquired = "leader.acquired"
	// LeaderReleased is written on a clean stop, after serving ended and before the Lease is
	// handed back. A replica that lost the Lease writes nothing: its fence refuses every
	// commit, and the next holder's LeaderAcquired names it as previous.
	LeaderReleased = "leader.released"
)

// SelftestRun records one run of `agora selftest` against a target (docs/selftest.md): actor
// the person, subject [SelftestTarget], details target, summary (the report's one line),
// digest (sha256 of the table's id, expected, seen, control and pass columns, in order),
// attacks, blocked, legitimate, allowed, not_enforced, not_run, failed and milliseconds (the
// wall time; the log's canonical JSON holds integers only), run (the --run pattern, "" for
// all), rows (the attacks run) and corpus (the attacks the corpus holds): rows below corpus
// is a slice, and its summary says so. It lets an auditor
// see when a host was last proven, and check a table someone attaches against it.
const SelftestRun = "selftest.run"
