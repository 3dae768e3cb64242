package orch

import (
	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/store"
)

// Migrations creates orch.db: its audit log, then runs, tasks and attempts. Append only.
func Migrations() []store.Migration {
	return append(append([]store.Migration{}, audit.Migrations...), store.Migration{
		Name: "orchestrator runs",
		SQL: `
CREATE TABLE runs (
	id               TEXT PRIMARY KEY,
	name             TEXT NOT NULL UNIQUE,
	digest           TEXT NOT NULL,      -- sha256 of the canonical plan
	plan             BLOB NOT NULL,      -- the canonical plan
	state            TEXT NOT NULL,
	actor            TEXT NOT NULL,
	repo             TEXT NOT NULL DEFAULT '',
	revision         TEXT NOT NULL DEFAULT '',
	cancel_requested INTEGER NOT NULL DEFAULT 0,
	created_at       TEXT NOT NULL,
	ended_at         TEXT NOT NULL DEFAULT '',
	sealed_at        TEXT NOT NULL DEFAULT ''
);
CREATE INDEX runs_open ON runs(sealed_at, created_at);

CREATE TABLE tasks (
	run_id      TEXT NOT NULL REFERENCES runs(id),
	idx         INTEGER NOT NULL,          -- position in the plan
	id          TEXT NOT NULL,
	state       TEXT NOT NULL,
	attempts    INTEGER NOT NULL DEFAULT 0, -- attempts fired
	failures    INTEGER NOT NULL DEFAULT 0, -- failed attempts counted against retry.max_attempts
	dispatch_id TEXT NOT NULL DEFAULT '',  -- the latest attempt's
	ready_seq   INTEGER NOT NULL DEFAULT 0, -- global order in which tasks became ready: lock fairness
	retry_at    TEXT NOT NULL DEFAULT '',
	reason      TEXT NOT NULL DEFAULT '',
	detail      TEXT NOT NULL DEFAULT '',
	question    TEXT NOT NULL DEFAULT '',
	answer      TEXT NOT NULL DEFAULT '',  -- given to the next attempt, then cleared
	cancel      INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (run_id, idx)
) WITHOUT ROWID;

CREATE TABLE attempts (
	dispatch_id TEXT PRIMARY KEY,
	run_id      TEXT NOT NULL,
	task_idx    INTEGER NOT NULL,
	number      INTEGER NOT NULL,
	state       TEXT NOT NULL,             -- live, then the outcome's state
	reason      TEXT NOT NULL DEFAULT '',
	parent_id   TEXT NOT NULL DEFAULT '',
	inputs      TEXT NOT NULL DEFAULT '[]',
	fired_at    TEXT NOT NULL,
	ended_at    TEXT NOT NULL DEFAULT ''
);
CREATE INDEX attempts_task ON attempts(run_id, task_idx, number);
`,
	}, store.Migration{
		// SQLite rewrites a whole row on every UPDATE, and the engine updates a run's row in
		// every commit that touches it: with the plan (a megabyte for 10,000 tasks) in that
		// row, each commit wrote the plan again.
		Name: "run plans in their own table",
		SQL: `
CREATE TABLE run_plans (
	run_id TEXT PRIMARY KEY REFERENCES runs(id),
	plan   BLOB NOT NULL                -- the canonical plan, never updated
);
INSERT INTO run_plans(run_id, plan) SELECT id, plan FROM runs;
ALTER TABLE runs DROP COLUMN plan;
`,
	}, store.Migration{
		// orch.db's log is read by run (the subject index) and by sequence, never by kind or
		// time (agora audit log reads agora.db), and each index costs a write per entry.
		Name: "orch audit log without kind and time indexes",
		SQL: `
DROP INDEX audit_entries_kind;
DROP INDEX audit_entries_at;
`,
	}, store.Migration{
		// Clustered by dispatch id (the key every attempt write uses), an attempt row costs
		// one b-tree fewer: no rowid table behind a separate primary-key index.
		Name: "attempts clustered by dispatch id",
		SQL: `
CREATE TABLE attempts_by_id (
	dispatch_id TEXT PRIMARY KEY,
	run_id      TEXT NOT NULL,
	task_idx    INTEGER NOT NULL,
	number      INTEGER NOT NULL,
	state       TEXT NOT NULL,             -- live, then the outcome's state
	reason      TEXT NOT NULL DEFAULT '',
	parent_id   TEXT NOT NULL DEFAULT '',
	inputs      TEXT NOT NULL DEFAULT '[]',
	fired_at    TEXT NOT NULL,
	ended_at    TEXT NOT NULL DEFAULT ''
) WITHOUT ROWID;
INSERT INTO attempts_by_id SELECT dispatch_id, run_id, task_idx, number, state, reason, parent_id, inputs, fired_at, ended_at FROM attempts;
DROP TABLE attempts;
ALTER TABLE attempts_by_id RENAME TO attempts;
CREATE INDEX attempts_task ON attempts(run_id, task_idx, number);
`,
	}, store.Migration{
		// A run is identified by what it works on (name, plan digest, workspace or
		// repository, commit), not by its name alone: the same plan on another commit is a new
		// run. The name stops being unique; the workspace the run was pinned to is kept.
		// SQLite drops a constraint only by rebuilding the table, and a parent table with
		// rows referencing it cannot be dropped with foreign keys on (as they are, inside
		// this transaction): so its children are rebuilt too, dropped before it, and the
		// renames carry their references over to the new runs.
		Name: "runs identified by what they work on",
		SQL: `
CREATE TABLE runs_new (
	id               TEXT PRIMARY KEY,
	name             TEXT NOT NULL,
	digest           TEXT NOT NULL,      -- sha256 of the canonical plan
	state            TEXT NOT NULL,
	actor            TEXT NOT NULL,
	workspace        TEXT NOT NULL DEFAULT '', -- name@sha256:HEX of the pinned workspace
	repo             TEXT NOT NULL DEFAULT '',
	revision         TEXT NOT NULL DEFAULT '',
	cancel_requested INTEGER NOT NULL DEFAULT 0,
	created_at       TEXT NOT NULL,
	ended_at         TEXT NOT NULL DEFAULT '',
	sealed_at        TEXT NOT NULL DEFAULT ''
);
INSERT INTO runs_new(id, name, digest, state, actor, repo, revision, cancel_requested, created_at, ended_at, sealed_at)
	SELECT id, name, digest, state, actor, repo, revision, cancel_requested, created_at, ended_at, sealed_at FROM runs;
CREATE TABLE tasks_new (
	run_id      TEXT NOT NULL REFERENCES runs_new(id),
	idx         INTEGER NOT NULL,          -- position in the plan
	id          TEXT NOT NULL,
	state       TEXT NOT NULL,
	attempts    INTEGER NOT NULL DEFAULT 0, -- attempts fired
	failures    INTEGER NOT NULL DEFAULT 0, -- failed attempts counted against retry.max_attempts
	dispatch_id TEXT NOT NULL DEFAULT '',  -- the latest attempt's
	ready_seq   INTEGER NOT NULL DEFAULT 0, -- global order in which tasks became ready: lock fairness
	retry_at    TEXT NOT NULL DEFAULT '',
	reason      TEXT NOT NULL DEFAULT '',
	detail      TEXT NOT NULL DEFAULT '',
	question    TEXT NOT NULL DEFAULT '',
	answer      TEXT NOT NULL DEFAULT '',  -- given to the next attempt, then cleared
	cancel      INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (run_id, idx)
) WITHOUT ROWID;
INSERT INTO tasks_new(run_id, idx, id, state, attempts, failures, dispatch_id, ready_seq, retry_at, reason, detail, question, answer, cancel)
	SELECT run_id, idx, id, state, attempts, failures, dispatch_id, ready_seq, retry_at, reason, detail, question, answer, cancel FROM tasks;
CREATE TABLE run_plans_new (
	run_id TEXT PRIMARY KEY REFERENCES runs_new(id),
	plan   BLOB NOT NULL                -- the canonical plan, never updated
);
INSERT INTO run_plans_new(run_id, plan) SELECT run_id, plan FROM run_plans;
DROP TABLE tasks;
DROP TABLE run_plans;
DROP TABLE runs;
ALTER TABLE runs_new RENAME TO runs;
ALTER TABLE tasks_new RENAME TO tasks;
ALTER TABLE run_plans_new RENAME TO run_plans;
CREATE INDEX runs_open ON runs(sealed_at, created_at);
CREATE INDEX runs_name ON runs(name, created_at);
`,
	}, store.Migration{
		// What each attempt's dispatch used (JSON budget.Usage), written in the transaction
		// that records the attempt's end: a run's usage is the sum over its attempts, so it is
		// never lost or counted twice across a crash.
		Name: "attempt usage",
		SQL: `
ALTER TABLE attempts ADD COLUMN usage TEXT NOT NULL DEFAULT '';
`,
	}, store.Migration{
		// The run's place in a trace (W3C ids, hex): its trace, its own span's id (chosen at
		// submit, so the record names it before the span is exported) and the traceparent of
		// the caller it joined, '' for a root. All '' when tracing was off and the caller sent
		// no traceparent.
		Name: "run trace",
		SQL: `
ALTER TABLE runs ADD COLUMN trace_id TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN trace_span TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN trace_parent TEXT NOT NULL DEFAULT '';
`,
	}, store.Migration{
		// The verdict of the attempt's verify gate (JSON verdict.Verdict, the tail included),
		// written in the transaction that records the attempt's end with its
		// orch.task.verified entry; '' when the attempt had no gate or never reached it.
		Name: "attempt verdict",
		SQL: `
ALTER TABLE attempts ADD COLUMN verdict TEXT NOT NULL DEFAULT '';
`,
	}, store.Migration{
		// Queues and schedules. A run records its queue (its plan's, 'default' for every run
		// before queues) and, when a schedule submitted it, the schedule, the slot (its id is
		// NAME@SLOT) and how many earlier slots were coalesced into it. A schedule is a
		// person's standing order: a cron spec in a zone, a canonical plan, and the slot it
		// last fired; next_due is indexed, so the scheduler reads the earliest due schedule
		// and scans nothing.
		Name: "queues and schedules",
		SQL: `
ALTER TABLE runs ADD COLUMN queue TEXT NOT NULL DEFAULT 'default';
ALTER TABLE runs ADD COLUMN schedule TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN slot TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN missed INTEGER NOT NULL DEFAULT 0;
CREATE INDEX runs_schedule ON runs(schedule, slot);

CREATE TABLE schedules (
	name       TEXT PRIMARY KEY,
	spec       TEXT NOT NULL,              -- the cron spec as validated: 5 fields or a descriptor
	zone       TEXT NOT NULL,              -- the IANA zone its fields are read in
	plan       BLOB NOT NULL,              -- the canonical plan, validated when added
	digest     TEXT NOT NULL,              -- its digest
	workspace  TEXT NOT NULL DEFAULT '',   -- the workspace given when added (NAME or NAME@sha256:HEX), resolved at each slot
	revision   TEXT NOT NULL DEFAULT '',   -- and its revision, resolved to a commit at each slot
	actor      TEXT NOT NULL,              -- who added it
	created_at TEXT NOT NULL,
	last_slot  TEXT NOT NULL DEFAULT '',   -- the latest slot fired (or refused), '' for none yet
	last_run   TEXT NOT NULL DEFAULT '',   -- the run of last_slot, '' when it was refused
	last_error TEXT NOT NULL DEFAULT '',   -- why last_slot was refused
	next_due   TEXT NOT NULL               -- the first slot after last_slot (or after created_at)
) WITHOUT ROWID;
CREATE INDEX schedules_due ON schedules(next_due);
`,
	}, store.Migration{
		// Tasks a running run added (fan-out items, reviewers, fixes): one row per extension,
		// written in the transaction of the event that caused it, holding what its tasks are
		// derived from; their task rows follow the plan's (idx first to first+count-1). A
		// reviewer's row keeps its review.
		Name: "run extensions",
		SQL: `
CREATE TABLE run_extensions (
	run_id TEXT NOT NULL REFERENCES runs(id),
	seq    INTEGER NOT NULL,    -- 0, 1, ... in the order applied
	cause  TEXT NOT NULL,       -- fan_out, review or fix
	task   TEXT NOT NULL,       -- the task it was for
	first  INTEGER NOT NULL,    -- idx of its first task
	count  INTEGER NOT NULL,
	data   BLOB NOT NULL,       -- canonical JSON: the items, the rejected work and its reasons
	PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
ALTER TABLE tasks ADD COLUMN review TEXT NOT NULL DEFAULT '';
`,
	}, store.Migration{
		// What lists show of a schedule's plan (its name, queue and task count), so a list
		// of schedules never reads (or parses) plans of up to 16 MiB each.
		Name: "schedule summaries",
		SQL: `
ALTER TABLE schedules ADD COLUMN plan_name TEXT NOT NULL DEFAULT '';
ALTER TABLE schedules ADD COLUMN queue TEXT NOT NULL DEFAULT 'default';
ALTER TABLE schedules ADD COLUMN tasks INTEGER NOT NULL DEFAULT 0;
`,
	}, store.Migration{
		// The task and attempt rows' log (rowlog.go): one record per commit of the rows it
		// changed, folded into tasks and attempts when the engine is idle (fold.go) and
		// read with them by every reader until then (overlay.go).
		Name: "row log",
		SQL: `
CREATE TABLE row_log (
	seq    INTEGER PRIMARY KEY,  -- the order of the commits that wrote them
	record BLOB NOT NULL         -- a binary record (rowlog.go)
);
`,
	}, store.Migration{
		// The runs a record changes rows of, readable without decoding it: internal/retention
		// keeps exactly those runs (and their attempts' dispatches) while the record waits,
		// not every run. '' (a record written before this column): unknown, so it keeps all.
		Name: "row log runs",
		SQL: `
ALTER TABLE row_log ADD COLUMN runs TEXT NOT NULL DEFAULT ''; -- JSON array of run ids (commit.go logRuns)
`,
	}, store.Migration{
		// The log indexed by its subjects' first 30 characters (audit.SubjectKey: "run/" and
		// the run's id) instead of whole subjects: a layer's 200 entries were 200 inserts
		// among their tasks' subjects, now they go to the end of their run's range. Only an
		// index changes: every entry's bytes, leaf and the tree stay as they are.
		Name: "orch audit log indexed by run",
		SQL: `
DROP INDEX audit_entries_subject;
CREATE INDEX audit_entries_run ON audit_entries(` + audit.SubjectKey + `, seq);
`,
	}, store.Migration{
		// The versions a run's plan's bare subagent names were pinned to at submit, canonical
		// JSON {"NAME": "NAME@sha256:HEX"}: what its tasks dispatch, and part of its identity
		// (a resubmission after a subagent changed is a new run). '' for a plan that pins
		// every version itself, and for every run before: such a run keeps its identity.
		Name: "run subagent versions",
		SQL: `
ALTER TABLE runs ADD COLUMN subagents TEXT NOT NULL DEFAULT '';
`,
	}, store.Migration{
		// A run's counts by state and its usage, kept by triggers in the statement (so the
		// transaction) that changes the rows they sum: a fold, a submit, an extension, a
		// purge, a migration. Readers add what the row log's unfolded records change
		// (reader.go), so a run's summary costs what the log holds, never a scan of the
		// run's rows. Backfilled from the tables as they stand. A purged run's rows go with
		// its runs row.
		Name: "run counts and usage",
		SQL: `
CREATE TABLE run_counts (
	run_id TEXT NOT NULL,
	state  TEXT NOT NULL,
	n      INTEGER NOT NULL,
	PRIMARY KEY (run_id, state)
) WITHOUT ROWID;
INSERT INTO run_counts(run_id, state, n) SELECT run_id, state, COUNT(*) FROM tasks GROUP BY run_id, state;
CREATE TRIGGER run_counts_insert AFTER INSERT ON tasks BEGIN
	INSERT INTO run_counts(run_id, state, n) VALUES (new.run_id, new.state, 1)
		ON CONFLICT(run_id, state) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER run_counts_update AFTER UPDATE OF state ON tasks WHEN old.state != new.state BEGIN
	UPDATE run_counts SET n = n - 1 WHERE run_id = old.run_id AND state = old.state;
	INSERT INTO run_counts(run_id, state, n) VALUES (new.run_id, new.state, 1)
		ON CONFLICT(run_id, state) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER run_counts_delete AFTER DELETE ON tasks BEGIN
	UPDATE run_counts SET n = n - 1 WHERE run_id = old.run_id AND state = old.state;
END;

CREATE TABLE run_usage (
	run_id        TEXT PRIMARY KEY,
	input_tokens  INTEGER NOT NULL,
	output_tokens INTEGER NOT NULL,
	cached_tokens INTEGER NOT NULL,
	model_calls   INTEGER NOT NULL,
	cost_usd      REAL NOT NULL,
	attempts      INTEGER NOT NULL   -- how many attempts with a usage are summed
) WITHOUT ROWID;
INSERT INTO run_usage SELECT run_id, TOTAL(json_extract(usage, '$.input_tokens')), TOTAL(json_extract(usage, '$.output_tokens')),
	TOTAL(json_extract(usage, '$.cached_tokens')), TOTAL(json_extract(usage, '$.model_calls')), TOTAL(json_extract(usage, '$.cost_usd')), COUNT(*)
	FROM attempts WHERE usage != '' AND json_valid(usage) GROUP BY run_id;
CREATE TRIGGER run_usage_insert AFTER INSERT ON attempts WHEN new.usage != '' AND json_valid(new.usage) BEGIN
	INSERT INTO run_usage VALUES (new.run_id, COALESCE(json_extract(new.usage, '$.input_tokens'), 0),
		COALESCE(json_extract(new.usage, '$.output_tokens'), 0), COALESCE(json_extract(new.usage, '$.cached_tokens'), 0),
		COALESCE(json_extract(new.usage, '$.model_calls'), 0), COALESCE(json_extract(new.usage, '$.cost_usd'), 0), 1)
	ON CONFLICT(run_id) DO UPDATE SET input_tokens = input_tokens + excluded.input_tokens,
		output_tokens = output_tokens + excluded.output_tokens, cached_tokens = cached_tokens + excluded.cached_tokens,
		model_calls = model_calls + excluded.model_calls, cost_usd = cost_usd + excluded.cost_usd, attempts = attempts + 1;
END;
CREATE TRIGGER run_usage_update_old AFTER UPDATE OF usage ON attempts WHEN old.usage != new.usage AND old.usage != '' AND json_valid(old.usage) BEGIN
	UPDATE run_usage SET input_tokens = input_tokens - COALESCE(json_extract(old.usage, '$.input_tokens'), 0),
		output_tokens = output_tokens - COALESCE(json_extract(old.usage, '$.output_tokens'), 0),
		cached_tokens = cached_tokens - COALESCE(json_extract(old.usage, '$.cached_tokens'), 0),
		model_calls = model_calls - COALESCE(json_extract(old.usage, '$.model_calls'), 0),
		cost_usd = cost_usd - COALESCE(json_extract(old.usage, '$.cost_usd'), 0), attempts = attempts - 1
	WHERE run_id = old.run_id;
END;
CREATE TRIGGER run_usage_update_new AFTER UPDATE OF usage ON attempts WHEN old.usage != new.usage AND new.usage != '' AND json_valid(new.usage) BEGIN
	INSERT INTO run_usage VALUES (new.run_id, COALESCE(json_extract(new.usage, '$.input_tokens'), 0),
		COALESCE(json_extract(new.usage, '$.output_tokens'), 0), COALESCE(json_extract(new.usage, '$.cached_tokens'), 0),
		COALESCE(json_extract(new.usage, '$.model_calls'), 0), COALESCE(json_extract(new.usage, '$.cost_usd'), 0), 1)
	ON CONFLICT(run_id) DO UPDATE SET input_tokens = input_tokens + excluded.input_tokens,
		output_tokens = output_tokens + excluded.output_tokens, cached_tokens = cached_tokens + excluded.cached_tokens,
		model_calls = model_calls + excluded.model_calls, cost_usd = cost_usd + excluded.cost_usd, attempts = attempts + 1;
END;
CREATE TRIGGER run_usage_delete AFTER DELETE ON attempts WHEN old.usage != '' AND json_valid(old.usage) BEGIN
	UPDATE run_usage SET input_tokens = input_tokens - COALESCE(json_extract(old.usage, '$.input_tokens'), 0),
		output_tokens = output_tokens - COALESCE(json_extract(old.usage, '$.output_tokens'), 0),
		cached_tokens = cached_tokens - COALESCE(json_extract(old.usage, '$.cached_tokens'), 0),
		model_calls = model_calls - COALESCE(json_extract(old.usage, '$.model_calls'), 0),
		cost_usd = cost_usd - COALESCE(json_extract(old.usage, '$.cost_usd'), 0), attempts = attempts - 1
	WHERE run_id = old.run_id;
END;
CREATE TRIGGER run_summary_purge AFTER DELETE ON runs BEGIN
	DELETE FROM run_counts WHERE run_id = old.id;
	DELETE FROM run_usage WHERE run_id = old.id;
END;
`,
	}, store.Migration{
		// The unskips an `orch retry` has still to go on with (unskip.go): a row while one
		// waits for the next batch, removed in the batch that ends it. A purged run's rows go
		// with its runs row.
		Name: "run unskips waiting",
		SQL: `
CREATE TABLE run_unskips (
	run_id TEXT NOT NULL,
	idx    INTEGER NOT NULL,   -- the retried task's position in the run
	PRIMARY KEY (run_id, idx)
) WITHOUT ROWID;
CREATE TRIGGER run_unskips_purge AFTER DELETE ON runs BEGIN
	DELETE FROM run_unskips WHERE run_id = old.id;
END;
`,
	})
}
