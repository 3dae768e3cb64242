package orch

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/orch/api"
)

// batch is everything one transaction commits and everything that happens after it.
type batch struct {
	entries     []audit.Entry
	events      []api.Event
	newRuns     []*run
	runs        map[*run]bool
	tasks       []*task
	fires       []Attempt    // the attempts to start after the commit
	attempts    []attemptRow // their rows: attempts[i] is fires[i]'s
	ended       []attemptEnd
	cancels     []string
	sealed      []string
	replies     []func(error)
	pooled      []map[string]any // the details maps newDetails made for this batch's entries
	exts        []extInsert      // extensions of runs that exist: their rows and their tasks' rows
	upd         []*task          // writeRows's: the tasks whose rows it updates
	swept       int              // tasks a cascade skipped, a run's cancel cancelled or an unskip took back in the batch (cascade.go)
	unskipNotes []unskipNote     // run_unskips rows to add and remove, in order (unskip.go)
}

type attemptRow struct {
	taskIx int
	at     time.Time
}

type attemptEnd struct {
	id, state, reason string
	runID             string // the attempt's run: named in the record's runs column (writeLog)
	at                time.Time
	usage             string // JSON budget.Usage, or ""
	verdict           string // JSON verdict.Verdict, or ""
}

func newBatch() *batch { return &batch{runs: map[*run]bool{}} }

// reuse empties b for the next batch, keeping the capacity of the lists that carry no
// reference out of the engine (fires were copied to the executor, events to watchers, the
// entries encoded, and an Observer reads them only during its call): a batch of a few
// hundred transitions otherwise grows each of them from nothing.
func (b *batch) reuse() *batch {
	clear(b.tasks)
	clear(b.fires)
	clear(b.events)
	clear(b.upd)
	clear(b.entries)
	return &batch{
		runs: map[*run]bool{}, tasks: b.tasks[:0], fires: b.fires[:0], attempts: b.attempts[:0], ended: b.ended[:0], events: b.events[:0],
		upd: b.upd[:0], entries: b.entries[:0], pooled: b.pooled[:0],
	}
}

func (b *batch) empty() bool {
	return len(b.entries) == 0 && len(b.replies) == 0 && len(b.fires) == 0 && len(b.cancels) == 0 && len(b.unskipNotes) == 0
}

// tsLayout sorts as text (fixed-width fraction).
const tsLayout = "2006-01-02T15:04:05.000000000Z07:00"

func ts(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(tsLayout)
}

// touch marks t (and its run) for writing in this batch.
func (e *Engine) touch(t *task) {
	if !t.dirty {
		t.dirty = true
		e.b.tasks = append(e.b.tasks, t)
	}
	e.b.runs[t.run] = true
}

// set moves t to state s.
func (e *Engine) set(t *task, s string) {
	if t.state != s {
		t.run.counts[t.state]--
		t.run.counts[s]++
		t.state = s
	}
	e.touch(t)
}

// record adds an audit entry and the watcher event it stands for.
func (e *Engine) record(r *run, t *task, kind string, details map[string]any) {
	subject := entry.Run(r.id)
	ev := api.Event{At: e.opts.Now().UTC(), Run: r.id, Kind: kind, State: r.state}
	if t != nil {
		subject = entry.Task(r.id, t.spec.ID)
		ev.Task, ev.State = t.spec.ID, t.state
	}
	if details == nil {
		details = map[string]any{}
	}
	details[entry.KeyRunName] = r.name
	if d, ok := details[entry.KeyDetail].(string); ok {
		ev.Detail = d
	}
	e.b.entries = append(e.b.entries, audit.Entry{Actor: entry.OrchActor, Kind: kind, Subject: subject, Details: details})
	r.entries++
	e.b.events = append(e.b.events, ev)
	e.b.runs[r] = true
}

// newDetails is an empty details map for an entry of the current batch, from the maps of
// batches committed before (recycleDetails): the entries of every transition otherwise
// make one each. The map must go to e.record and nowhere else.
func (e *Engine) newDetails() map[string]any {
	var m map[string]any
	if n := len(e.freeDetails); n > 0 {
		m = e.freeDetails[n-1]
		e.freeDetails[n-1] = nil
		e.freeDetails = e.freeDetails[:n-1]
	} else {
		m = make(map[string]any, smallDetails)
	}
	e.b.pooled = append(e.b.pooled, m)
	return m
}

// Details maps are kept for reuse while they hold at most smallDetails keys (one group of
// the map's table), at most maxFreeDetails of them.
const (
	smallDetails   = 8
	maxFreeDetails = 1024
)

// recycleDetails empties the maps newDetails made for b, once b is committed and its
// observer has returned (no one holds its entries then), and keeps them for the next batches.
func (e *Engine) recycleDetails(b *batch) {
	for _, m := range b.pooled {
		if len(m) <= smallDetails && len(e.freeDetails) < maxFreeDetails {
			clear(m)
			e.freeDetails = append(e.freeDetails, m)
		}
	}
	clear(b.pooled)
	b.pooled = b.pooled[:0]
}

// commit writes the batch in one transaction.
func (e *Engine) commit(ctx context.Context, b *batch) error {
	// A commit is never abandoned halfway (the engine stops between commits), and a
	// cancellable ctx would cost the driver a goroutine per statement.
	ctx = context.WithoutCancel(ctx)
	var folded, want int
	err := e.db.Tx(ctx, func(tx *sql.Tx) error {
		folded, want, e.logged = 0, 0, false
		// The entries' canonical JSON and leaf hashes are computed on a second goroutine
		// while the rows are written (the same bytes as appending them after the rows).
		first, err := e.log.AppendAllAlongside(ctx, tx, e.stmts.audit, b.entries, func() error {
			if e.unfolded >= e.foldBound || e.unfoldedRows >= e.foldRows {
				// Past a bound, each commit folds the oldest records first (fold.go): a
				// few records in every commit, not a chunk that holds up the next one.
				want = e.foldCount()
				n, err := e.foldIn(ctx, tx, want)
				if err != nil {
					return err
				}
				folded = n
			}
			return e.writeRows(ctx, tx, b)
		})
		if err != nil {
			return err
		}
		for i := range b.events {
			b.events[i].Seq = first + int64(i)
		}
		return nil
	})
	if err != nil {
		e.logged = false
		return err
	}
	if folded > 0 {
		e.unfolded -= folded
		e.foldedRows(folded)
		if folded < want {
			e.unfolded = 0 // the log held fewer: it is empty now
			e.foldedRows(-1)
		}
	}
	if e.logged {
		e.unfolded++
		e.loggedRows(e.recRows)
	}
	e.logged = false
	for _, r := range b.newRuns {
		// The plan is in run_plans now; the run's tasks hold what the engine needs of it.
		r.inserted, r.canonical = false, nil
	}
	for _, t := range b.tasks {
		t.dirty, t.fresh = false, false
	}
	return nil
}

// writeRows writes the batch's runs, tasks and attempts in tx with the engine's prepared
// statements.
func (e *Engine) writeRows(ctx context.Context, tx *sql.Tx, b *batch) error {
	for _, r := range b.newRuns {
		if err := e.insertRun(ctx, tx, r); err != nil {
			return err
		}
	}
	if len(b.runs) > 0 {
		stmt := tx.StmtContext(ctx, e.stmts.updateRun)
		for r := range b.runs {
			if r.inserted {
				continue
			}
			if _, err := stmt.ExecContext(ctx, r.state, r.cancelRequested, ts(r.endedAt), sealedAt(r, e.opts.Now()), r.id); err != nil {
				return err
			}
		}
	}
	if err := e.insertExtensions(ctx, tx, b.exts); err != nil {
		return err
	}
	for _, n := range b.unskipNotes {
		q := `INSERT OR IGNORE INTO run_unskips(run_id, idx) VALUES (?, ?)`
		if n.drop {
			q = `DELETE FROM run_unskips WHERE run_id = ? AND idx = ?`
		}
		if _, err := tx.ExecContext(ctx, q, n.run, n.idx); err != nil {
			return fmt.Errorf("note a retry's unskip of run %s: %w", n.run, err)
		}
	}
	// The rows as statements of many rows each (multirow.go). New tasks' rows were inserted
	// whole (insertRun, insertExtensions): only the others are updated.
	upd := b.upd[:0]
	for _, t := range b.tasks {
		if !t.run.inserted && !t.fresh {
			upd = append(upd, t)
		}
	}
	b.upd = upd
	return e.writeLog(ctx, tx, b)
}

// writeLog writes the batch's task updates, attempt inserts and attempt ends as one row_log
// record (rowlog.go).
func (e *Engine) writeLog(ctx context.Context, tx *sql.Tx, b *batch) error {
	rec := &e.rec
	rec.tasks, rec.inserts, rec.ends = rec.tasks[:0], rec.inserts[:0], rec.ends[:0]
	for _, t := range b.upd {
		rec.tasks = append(rec.tasks, taskImage{runID: t.run.id, idx: t.idx, state: t.state, attempts: t.attempts, failures: t.failures,
			dispatchID: t.dispatchID, readySeq: t.readySeq, retryAt: ts(t.retryAt), reason: t.reason, detail: t.detail,
			question: t.question, answer: t.answer, cancel: t.cancel, review: voteJSON(t)})
	}
	for i, row := range b.attempts {
		at := &b.fires[i]
		rec.inserts = append(rec.inserts, attemptImage{dispatchID: at.DispatchID, runID: at.RunID, taskIdx: row.taskIx, number: at.Number,
			parentID: at.ParentID, inputs: inputsJSON(at.Inputs), firedAt: ts(row.at)})
	}
	for i := range b.ended {
		x := &b.ended[i]
		rec.ends = append(rec.ends, endImage{id: x.id, state: x.state, reason: x.reason, endedAt: ts(x.at), usage: x.usage, verdict: x.verdict})
	}
	e.recRows = len(rec.tasks) + len(rec.inserts) + len(rec.ends)
	if e.recRows == 0 {
		return nil
	}
	e.logBuf = rec.encodeWith(e.logBuf[:0], &e.recWire)
	if _, err := tx.StmtContext(ctx, e.stmts.insertLog).ExecContext(ctx, e.logBuf, e.logRuns(b)); err != nil {
		return fmt.Errorf("write the row log: %w", err)
	}
	e.logged = true
	return nil
}

// logRuns is the runs column of the record writeLog writes for b: the ids of every run whose
// rows the record changes, as a JSON array, in the order first named. internal/retention reads
// it (it cannot decode records) to keep exactly those runs, and their attempts' dispatches,
// while the record waits (docs/ARCHITECTURE.md "The row log").
func (e *Engine) logRuns(b *batch) string {
	names := e.logNames[:0]
	if e.logNamed == nil {
		e.logNamed = map[string]struct{}{}
	}
	clear(e.logNamed)
	add := func(id string) {
		if _, ok := e.logNamed[id]; !ok {
			e.logNamed[id] = struct{}{}
			names = append(names, id)
		}
	}
	for i := range e.rec.tasks {
		add(e.rec.tasks[i].runID)
	}
	for i := range e.rec.inserts {
		add(e.rec.inserts[i].runID)
	}
	for i := range b.ended {
		add(b.ended[i].runID)
	}
	e.logNames = names
	j, _ := json.Marshal(names)
	return string(j)
}

func inputsJSON(in []Input) string {
	if in == nil {
		return "[]"
	}
	j, _ := json.Marshal(in)
	return string(j)
}

func sealedAt(r *run, now time.Time) string {
	if !r.sealed {
		return ""
	}
	return ts(now)
}

// insertRun writes a new run and all its tasks.
func (e *Engine) insertRun(ctx context.Context, tx *sql.Tx, r *run) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO runs(id, name, digest, state, actor, workspace, repo, revision, cancel_requested, created_at, ended_at,
		trace_id, trace_span, trace_parent, queue, schedule, slot, missed, subagents)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.id, r.name, r.digest, r.state, r.actor, r.workspace, r.repo, r.revision, r.cancelRequested, ts(r.createdAt), ts(r.endedAt),
		r.trace.ID, r.trace.Span, r.trace.Parent, r.q.name, r.slot.Schedule, ts(r.slot.At), r.slot.Missed, r.pins); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO run_plans(run_id, plan) VALUES (?, ?)`, r.id, r.canonical); err != nil {
		return err
	}
	return e.insertTasks(ctx, tx, r, r.tasks)
}

// insertTasks writes the rows of tasks of r with the prepared statements of many rows
// (multirow.go): prepared once, unlike the 500-row VALUES statements of 7,000 parameters
// a run's rows were once written with, which SQLite compiled more slowly than it ran a
// one-row statement that many times (docs/BENCHMARKS.md).
func (e *Engine) insertTasks(ctx context.Context, tx *sql.Tx, r *run, tasks []*task) error {
	// A new task's row is nearly always its defaults but its state and ready_seq: the plain
	// insert binds only what differs (multirow.go).
	at, k := splitPlain(e.split, len(tasks), func(i int) bool {
		t := tasks[i]
		return t.attempts == 0 && t.failures == 0 && t.dispatchID == "" && t.retryAt.IsZero() && t.reason == "" && t.detail == "" &&
			t.question == "" && t.answer == "" && !t.cancel
	})
	e.split = at
	err := writeChunked(ctx, tx, &e.stmts.insertTasksPlain, k, &e.args, func(a []any, i int) []any {
		t := tasks[at[i]]
		return append(a, r.id, t.idx, t.spec.ID, t.state, t.readySeq)
	})
	if err != nil {
		return err
	}
	return writeChunked(ctx, tx, &e.stmts.insertTasks, len(at)-k, &e.args, func(a []any, i int) []any {
		t := tasks[at[k+i]]
		return append(a, r.id, t.idx, t.spec.ID, t.state, t.attempts, t.failures, t.dispatchID, t.readySeq,
			ts(t.retryAt), t.reason, t.detail, t.question, t.answer, t.cancel)
	})
}
