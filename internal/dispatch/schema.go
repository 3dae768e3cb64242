package dispatch

import "github.com/agora-dev/agora/internal/store"

// Migrations creates the dispatch tables of agora.db.
//
// A dispatch row is written in state accepted BEFORE anything starts; every later state
// change, its event row and its audit entry commit together. Terminal states are never
// left. callback_outbox holds signed lifecycle events until they are delivered.
var Migrations = []store.Migration{{
	Name: "dispatch records",
	SQL: `
CREATE TABLE dispatches (
	id               TEXT PRIMARY KEY,
	state            TEXT NOT NULL,
	reason           TEXT NOT NULL DEFAULT '',
	detail           TEXT NOT NULL DEFAULT '',
	exit_code        INTEGER,
	subagent         TEXT NOT NULL,
	subagent_digest  TEXT NOT NULL,
	envs             TEXT NOT NULL,     -- JSON [{name, digest}]
	target           TEXT NOT NULL,
	sandbox          TEXT NOT NULL,
	network          TEXT NOT NULL,
	input_digest     TEXT NOT NULL,
	repo             TEXT NOT NULL DEFAULT '',
	revision         TEXT NOT NULL DEFAULT '',
	timeout_ms       INTEGER NOT NULL,
	parent_id        TEXT NOT NULL DEFAULT '',
	actor            TEXT NOT NULL,
	provider_task_id TEXT NOT NULL DEFAULT '',
	supervisor       TEXT NOT NULL DEFAULT '',
	cancel_requested INTEGER NOT NULL DEFAULT 0,
	callback_url     TEXT NOT NULL DEFAULT '',
	created_at       TEXT NOT NULL,
	started_at       TEXT NOT NULL DEFAULT '',
	ended_at         TEXT NOT NULL DEFAULT '',
	isolation        TEXT NOT NULL DEFAULT '',
	result           TEXT NOT NULL DEFAULT ''  -- JSON: refs to patch, outputs, logs; needs_input
);
CREATE INDEX dispatches_state ON dispatches(state, created_at);
CREATE INDEX dispatches_created ON dispatches(created_at);

CREATE TABLE dispatch_events (
	dispatch_id TEXT NOT NULL REFERENCES dispatches(id),
	seq         INTEGER NOT NULL,
	kind        TEXT NOT NULL,
	at          TEXT NOT NULL,
	data        TEXT NOT NULL,
	PRIMARY KEY (dispatch_id, seq)
) WITHOUT ROWID;

CREATE TABLE callback_outbox (
	id           TEXT PRIMARY KEY,
	dispatch_id  TEXT NOT NULL,
	url          TEXT NOT NULL,
	body         BLOB NOT NULL,
	attempts     INTEGER NOT NULL DEFAULT 0,
	next_at      TEXT NOT NULL,
	delivered_at TEXT NOT NULL DEFAULT '',
	last_error   TEXT NOT NULL DEFAULT ''
);
CREATE INDEX callback_outbox_due ON callback_outbox(delivered_at, next_at);
`,
}, {
	Name: "dispatch inputs",
	SQL: `
-- JSON [{key, select, from_dispatch, files: [{path, digest, size}]}]: upstream products mounted
-- read-only at /agora/inputs/<key>, recorded so a run's provenance can be checked offline.
ALTER TABLE dispatches ADD COLUMN inputs TEXT NOT NULL DEFAULT '[]';
`,
}, {
	Name: "dispatch grants",
	SQL: `
-- JSON {tools, commands, egress}: what the worker was granted, the subagent's grant narrowed
-- by the dispatch. '' on records accepted before this column existed (the whole grant).
ALTER TABLE dispatches ADD COLUMN grants TEXT NOT NULL DEFAULT '';
`,
}, {
	Name: "dispatch workspace",
	SQL: `
-- NAME@sha256:HEX of the workspace a dispatch named, or '' (a --repo dispatch or none). repo
-- then holds the workspace's repository and revision the commit its revision resolved to.
ALTER TABLE dispatches ADD COLUMN workspace TEXT NOT NULL DEFAULT '';
`,
}, {
	Name: "dispatch network",
	SQL: `
-- JSON {reached: {host:port: n}, refused: {host:port: n}, bytes_up, bytes_down}: what the
-- dispatch's egress proxy saw, written with the terminal state. '' without the proxy.
ALTER TABLE dispatches ADD COLUMN net TEXT NOT NULL DEFAULT '';
`,
}, {
	Name: "dispatch runtime binary",
	SQL: `
-- JSON {path, host_path, version, sha256}: the host-installed agent CLI (claude, codex) the
-- dispatch's sandbox ran, bound read-only, written before the sandbox starts. '' for a runtime
-- that runs none, or a CLI found on the sandbox's PATH (shipped in a capability).
ALTER TABLE dispatches ADD COLUMN runtime_binary TEXT NOT NULL DEFAULT '';
`,
}, {
	Name: "dispatch usage",
	SQL: `
-- JSON {tokens, usd, model_calls}: the effective budget (the subagent's, the target's and the
-- caller's, narrowed), written at accept; '' when none. usage: JSON {input_tokens,
-- output_tokens, cached_tokens, model_calls, cost_usd} the gateway counted, written with the
-- terminal state; '' for a dispatch without a model gateway.
ALTER TABLE dispatches ADD COLUMN budget TEXT NOT NULL DEFAULT '';
ALTER TABLE dispatches ADD COLUMN usage TEXT NOT NULL DEFAULT '';
`,
}, {
	Name: "dispatch approvals",
	SQL: `
-- One row per call held for a person's approval (a capability's approve rules): the call as
-- the runtime named it, the sha256 of its canonical arguments (the decision binds to it), a
-- redacted, capped preview, and how it was decided: approved or denied by a person (actor,
-- the OS user), or expired (actor system). seq numbers a dispatch's requests in order.
CREATE TABLE dispatch_approvals (
	dispatch_id  TEXT NOT NULL REFERENCES dispatches(id),
	seq          INTEGER NOT NULL,
	call_id      TEXT NOT NULL,
	tool         TEXT NOT NULL,
	args_digest  TEXT NOT NULL,
	preview      TEXT NOT NULL,
	rule         TEXT NOT NULL,
	role         TEXT NOT NULL,
	state        TEXT NOT NULL,
	reason       TEXT NOT NULL DEFAULT '',
	actor        TEXT NOT NULL DEFAULT '',
	requested_at TEXT NOT NULL,
	expires_at   TEXT NOT NULL,
	decided_at   TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (dispatch_id, seq)
) WITHOUT ROWID;
CREATE INDEX dispatch_approvals_pending ON dispatch_approvals(dispatch_id, state);
`,
}, {
	Name: "dispatch trace",
	SQL: `
-- The dispatch's place in a trace (W3C ids, hex): the trace, the id of the dispatch's own span
-- (chosen at accept, so the accept span and the detached supervisor name the same span) and
-- the traceparent of its parent (a task's span, an MCP or CLI caller's), '' without one. All
-- '' when tracing was off and no caller sent a traceparent. Ids only, never a secret.
ALTER TABLE dispatches ADD COLUMN trace_id TEXT NOT NULL DEFAULT '';
ALTER TABLE dispatches ADD COLUMN trace_span TEXT NOT NULL DEFAULT '';
ALTER TABLE dispatches ADD COLUMN trace_parent TEXT NOT NULL DEFAULT '';
`,
}, {
	Name: "dispatch answers",
	SQL: `
-- A run's attempt names its run and task (it is answered or cancelled only through its run,
-- never over MCP); a dispatch that needed input and was answered (state answered) names its one child,
-- who answered and when, written with the child's row and the dispatch.answered entry in one
-- transaction, so two answers cannot both win. Attempts recorded before this column existed
-- carry their run in the actor ("USER via orch/RUN/TASK"; run and task ids hold no '/').
ALTER TABLE dispatches ADD COLUMN run_id TEXT NOT NULL DEFAULT '';
ALTER TABLE dispatches ADD COLUMN task_id TEXT NOT NULL DEFAULT '';
ALTER TABLE dispatches ADD COLUMN child_id TEXT NOT NULL DEFAULT '';
ALTER TABLE dispatches ADD COLUMN answered_by TEXT NOT NULL DEFAULT '';
ALTER TABLE dispatches ADD COLUMN answered_at TEXT NOT NULL DEFAULT '';
CREATE INDEX dispatches_parent ON dispatches(parent_id) WHERE parent_id != '';
UPDATE dispatches SET
	run_id = substr(substr(actor, instr(actor, ' via orch/') + 10), 1, instr(substr(actor, instr(actor, ' via orch/') + 10), '/') - 1),
	task_id = substr(substr(actor, instr(actor, ' via orch/') + 10), instr(substr(actor, instr(actor, ' via orch/') + 10), '/') + 1)
WHERE instr(actor, ' via orch/') > 0 AND instr(substr(actor, instr(actor, ' via orch/') + 10), '/') > 1;
`,
}, {
	Name: "approval arguments",
	SQL: `
-- A held call's whole arguments, canonical JSON with the dispatch's secrets masked, so that a
-- person can read all of them before deciding (agora dispatch approval show); kept only
-- while the call is pending ('' once decided or expired: the preview and the digest stay).
-- args_bytes is the size of the canonical arguments. 0 and '' for calls held before.
ALTER TABLE dispatch_approvals ADD COLUMN args TEXT NOT NULL DEFAULT '';
ALTER TABLE dispatch_approvals ADD COLUMN args_bytes INTEGER NOT NULL DEFAULT 0;
`,
}, {
	Name: "dispatch verify gate",
	SQL: `
-- verify: JSON {command, timeout, protect}, the dispatch's verify gate (timeout resolved),
-- written at accept; '' for none. verdict: JSON verdict.Verdict (exit, duration, the last
-- 16 KiB of output redacted, its sha256, protected paths), what agora observed running the
-- gate in a fresh sandbox, written with the terminal state and its dispatch.verified entry;
-- '' when there was no gate or the dispatch ended before it.
ALTER TABLE dispatches ADD COLUMN verify TEXT NOT NULL DEFAULT '';
ALTER TABLE dispatches ADD COLUMN verdict TEXT NOT NULL DEFAULT '';
`,
}, {
	Name: "dispatch worker binary",
	SQL: `
-- JSON {path, host_path, version, sha256}: the worker program (cmd/agora-worker) the
-- dispatch's sandbox ran: its path there, the pinned copy on the host that was bound
-- read-only, the agora build it says it is and the sha256 of its bytes, written before the
-- sandbox starts. '' for a kubernetes target (the pod runs its image's worker) and for
-- dispatches recorded before the slim worker (#28).
ALTER TABLE dispatches ADD COLUMN worker_binary TEXT NOT NULL DEFAULT '';
`,
}, {
	Name: "dispatch worker image",
	SQL: `
-- REF@sha256:<hex>: the image a kubernetes target's pod ran its worker from (the target's
-- worker_image, digest-pinned in agora.yaml), written with worker_binary before the pod is
-- created, so the audit says which worker ran where no host binary was bound. '' otherwise.
ALTER TABLE dispatches ADD COLUMN worker_image TEXT NOT NULL DEFAULT '';
`,
}, {
	Name: "dispatch learn",
	SQL: `
-- 1 for a learn dispatch (docs/learn.md: what its grant would refuse was recorded as
-- *.would_deny instead of refused), 0 otherwise and for every dispatch recorded before.
ALTER TABLE dispatches ADD COLUMN learn INTEGER NOT NULL DEFAULT 0;
`,
}, {
	Name: "dispatch stack base",
	SQL: `
-- The commit (the tree, without a repository) a stacked dispatch starts from: its revision
-- with its stack inputs' patches applied in order, one commit each, computed at accept
-- (stack.go). '' for every other dispatch and for every dispatch recorded before.
ALTER TABLE dispatches ADD COLUMN stack_base TEXT NOT NULL DEFAULT '';
`,
}}

// LearnIndexMigrations index agora.db's learn dispatches by run, so [Records.LearnInRun]
// reads a run's learn dispatches alone: without it, every load of a run page scanned every
// dispatch ever recorded. Partial: a dispatch that is not a learn one costs no write.
var LearnIndexMigrations = []store.Migration{{
	Name: "learn dispatches by run",
	SQL: `
CREATE INDEX dispatches_learn_run ON dispatches(run_id) WHERE learn = 1;
`,
}}
