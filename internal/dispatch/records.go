package dispatch

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/agora-dev/agora/internal/budget"
	"github.com/agora-dev/agora/internal/errclass"

	"github.com/oklog/ulid/v2"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/egress/proxy"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/store"
	"github.com/agora-dev/agora/internal/verdict"
)

// Records keeps dispatch records, their lifecycle events, audit entries and callback outbox
// rows; every state change writes all of them in one transaction.
type Records struct {
	db  *store.DB
	log *audit.Log
	now func() time.Time
	// stmts prepares the record reads (getRecord's) once per Records.
	stmts *stmts
}

// NewRecords returns the record keeper over db.
func NewRecords(db *store.DB, log *audit.Log, now func() time.Time) *Records {
	if now == nil {
		now = time.Now
	}
	return &Records{db: db, log: log, now: now, stmts: newStmts(db.SQL())}
}

// NewID returns a new dispatch id: a ULID, so ids sort by creation time.
func NewID(now time.Time) string {
	return ulid.MustNew(ulid.Timestamp(now), rand.Reader).String()
}

// newBatcher returns a group-commit writer of audit entries to agora.db; the caller runs it.
func (s *Records) newBatcher() *audit.Batcher { return audit.NewBatcher(s.db, s.log) }

// AppendAudit appends e to agora.db's audit log in a transaction of its own: for records
// that describe no state change of a dispatch, such as its gateway's requests and its
// worker's tool decisions.
func (s *Records) AppendAudit(ctx context.Context, e audit.Entry) error {
	return s.db.Tx(ctx, func(tx *sql.Tx) error {
		_, err := s.log.Append(ctx, tx, e)
		return err
	})
}

// Get returns the record with its events.
func (s *Records) Get(ctx context.Context, id string) (*Record, error) {
	return getRecord(ctx, s.prepared(s.db.SQL()), id)
}

// List returns records, newest first.
func (s *Records) List(ctx context.Context, f ListFilter) ([]*Record, error) {
	return listRecords(ctx, s.db.SQL(), f)
}

// tsLayout is RFC 3339 with a fixed-width fraction, so stored times sort as strings (RFC3339Nano
// trims trailing zeros, and "05.1Z" sorts after "05.12Z").
const tsLayout = "2006-01-02T15:04:05.000000000Z07:00"

func ts(t time.Time) string { return t.UTC().Format(tsLayout) }

// Accept writes r in state accepted, with its event and audit entry. Nothing may start
// before it returns. A child (r.ParentID set) also moves its parent from needs_input to
// answered in the same transaction; a parent already answered refuses it ([AnsweredError]).
func (s *Records) Accept(ctx context.Context, r *Record) error {
	r.State = lifecycle.DispatchAccepted
	r.CreatedAt = s.now().UTC()
	envs, err := json.Marshal(r.Envs)
	if err != nil {
		return err
	}
	inputs := []byte("[]")
	if len(r.Inputs) > 0 {
		if inputs, err = json.Marshal(r.Inputs); err != nil {
			return err
		}
	}
	grants := []byte{}
	if r.Grants != nil {
		if grants, err = json.Marshal(r.Grants); err != nil {
			return err
		}
	}
	budgetJSON := []byte{}
	if r.Budget != nil {
		if budgetJSON, err = json.Marshal(r.Budget); err != nil {
			return err
		}
	}
	verifyJSON := []byte{}
	if r.Verify != nil {
		if verifyJSON, err = json.Marshal(r.Verify); err != nil {
			return err
		}
	}
	return s.db.Tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `
INSERT INTO dispatches(id, state, subagent, subagent_digest, envs, target, sandbox, network, input_digest,
	repo, revision, timeout_ms, parent_id, actor, callback_url, created_at, supervisor, inputs, grants, workspace, budget,
	trace_id, trace_span, trace_parent, run_id, task_id, verify, learn, stack_base)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			r.ID, r.State, r.Subagent, r.SubagentDigest, string(envs), r.Target, r.Sandbox, r.Network, r.InputDigest,
			r.Repo, r.Revision, time.Duration(r.Timeout).Milliseconds(), r.ParentID, r.Actor, r.CallbackURL, ts(r.CreatedAt),
			selfSupervisor(), string(inputs), string(grants), r.Workspace, string(budgetJSON),
			r.TraceID, r.TraceSpan, r.TraceParent, r.RunID, r.TaskID, string(verifyJSON), r.Learn, r.StackBase)
		if store.IsUniqueViolation(err) {
			return fmt.Errorf("record dispatch %s: %w", r.ID, ErrExists)
		}
		if err != nil {
			return fmt.Errorf("record dispatch %s: %w", r.ID, err)
		}
		if r.ParentID != "" {
			// The child and its parent's answer commit together, or neither does.
			if err := s.answered(ctx, tx, r); err != nil {
				return err
			}
		}
		var inputRefs []any
		for _, in := range r.Inputs {
			files := make([]any, len(in.Files))
			for i, f := range in.Files {
				files[i] = f.Path + "=" + string(f.Digest)
			}
			ref := map[string]any{"key": in.Key, "select": in.Select, "from_dispatch": in.FromDispatch, "files": files}
			if in.Dir != "" {
				ref["dir"] = in.Dir
			}
			if in.Apply {
				ref["apply"] = true
			}
			if in.Stack {
				ref["stack"] = true
			}
			inputRefs = append(inputRefs, ref)
		}
		envNames := make([]any, len(r.Envs))
		for i, e := range r.Envs {
			envNames[i] = e.Name + "@" + string(e.Digest)
		}
		data := map[string]any{
			entry.KeySubagent: r.Subagent + "@" + string(r.SubagentDigest), entry.KeyEnvs: envNames, entry.KeyTarget: r.Target,
			"sandbox": r.Sandbox, "network": r.Network, entry.KeyInputDigest: string(r.InputDigest), "parent_id": r.ParentID,
		}
		if len(inputRefs) > 0 {
			data["inputs"] = inputRefs
		}
		if r.Grants != nil {
			data["grants"] = grantsDetails(*r.Grants)
		}
		if r.Budget != nil {
			data["budget"] = r.Budget.Canonical()
		}
		if r.Verify != nil {
			data[entry.KeyVerify] = r.Verify.Details()
		}
		if r.Workspace != "" {
			// The name and the commit, never the path: the audit says what was worked on.
			data["workspace"], data["revision"] = r.Workspace, r.Revision
		}
		if r.Learn {
			data[entry.KeyLearn] = true // absent on every other dispatch: their bytes are as before
		}
		if r.StackBase != "" {
			// Where a stacked dispatch starts: its revision plus its stack inputs' patches
			// (listed above with their digests). Absent on every other dispatch.
			data["stack_base"] = r.StackBase
		}
		if err := s.event(ctx, tx, r, lifecycle.DispatchAccepted, data); err != nil {
			return err
		}
		if r.wouldDeny != nil {
			role := r.Subagent + "@" + string(r.SubagentDigest)
			details := map[string]any{"dispatch": r.ID, entry.KeyRole: role}
			for k, v := range r.wouldDeny {
				details[k] = v
			}
			_, err := s.log.Append(ctx, tx, audit.Entry{Actor: entry.GatewayActor(r.ID, role), Kind: entry.ToolWouldDeny,
				Subject: entry.Dispatch(r.ID), Details: details})
			return err
		}
		return nil
	})
}

// event appends a lifecycle event, its audit entry and (when the dispatch has a callback) an
// outbox row, inside tx.
func (s *Records) event(ctx context.Context, tx *sql.Tx, r *Record, kind string, data map[string]any) error {
	var seq int
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq)+1, 0) FROM dispatch_events WHERE dispatch_id = ?`, r.ID).Scan(&seq); err != nil {
		return err
	}
	for k, v := range data {
		if v == "" || v == nil {
			delete(data, k)
		}
	}
	at := s.now().UTC()
	body, err := json.Marshal(data)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO dispatch_events(dispatch_id, seq, kind, at, data) VALUES (?, ?, ?, ?, ?)`,
		r.ID, seq, kind, ts(at), string(body)); err != nil {
		return fmt.Errorf("record %s event of dispatch %s: %w", kind, r.ID, err)
	}
	if _, err := s.log.Append(ctx, tx, audit.Entry{
		Actor: r.Actor, Kind: entry.DispatchState(kind), Subject: entry.Dispatch(r.ID), Details: data,
	}); err != nil {
		return err
	}
	if r.CallbackURL != "" {
		return enqueueCallback(ctx, tx, r, seq, kind, at, data)
	}
	return nil
}

// Started records that the provider runs the worker.
func (s *Records) Started(ctx context.Context, id, taskID, supervisor string) error {
	_, err := s.started(ctx, id, taskID, supervisor, nil)
	return err
}

// started is Started returning the record as it commits, read in the same transaction (the
// supervisor reports it; a separate read after the commit would cost a dispatch a query).
// bins, when not nil, are the binaries the sandbox runs, recorded in the same transaction:
// a warm slot's claim commits this before it releases the slot.
func (s *Records) started(ctx context.Context, id, taskID, supervisor string, bins *binaries) (*Record, error) {
	return s.startedAs(ctx, id, taskID, supervisor, bins, false)
}

// startedAs is started; resumed, when the provider's Start found the dispatch's task running
// already (compute.Resumed: a Job an earlier supervisor made before it died), also records
// the dispatch adopted (dispatch.adopted) in the same transaction: its pod ran before this
// process took it.
func (s *Records) startedAs(ctx context.Context, id, taskID, supervisor string, bins *binaries, resumed bool) (*Record, error) {
	var started *Record
	err := s.db.Tx(ctx, func(tx *sql.Tx) error {
		r, err := getRecord(ctx, s.prepared(tx), id)
		if err != nil {
			return err
		}
		if r.State != lifecycle.DispatchAccepted {
			return fmt.Errorf("dispatch %s is %s, not accepted", id, r.State)
		}
		if err := setBinaries(ctx, tx, id, bins); err != nil {
			return err
		}
		now := s.now().UTC()
		if _, err := tx.ExecContext(ctx, `UPDATE dispatches SET state = ?, provider_task_id = ?, supervisor = ?, started_at = ? WHERE id = ?`,
			lifecycle.DispatchStarted, taskID, supervisor, ts(now), id); err != nil {
			return err
		}
		if err := s.event(ctx, tx, r, lifecycle.DispatchStarted, map[string]any{"provider_task_id": taskID}); err != nil {
			return err
		}
		if resumed {
			if _, err := s.log.Append(ctx, tx, audit.Entry{Actor: SystemActor, Kind: entry.DispatchAdopted, Subject: entry.Dispatch(id),
				Details: map[string]any{"supervisor": supervisor, entry.KeyRole: "supervisor", "provider_task_id": taskID, "at_start": true}}); err != nil {
				return err
			}
		}
		started, err = getRecord(ctx, s.prepared(tx), id)
		return err
	})
	return started, err
}

// SetProviderTask names the provider task a started dispatch runs now: its verify gate's
// sandbox, after the agent's ended. Cancel and Reap, from any process, then stop that one (a
// container outlives a supervisor killed with -9; its uid stays leased until it is removed).
func (s *Records) SetProviderTask(ctx context.Context, id, taskID string) error {
	return s.db.Tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE dispatches SET provider_task_id = ? WHERE id = ? AND state = ?`, taskID, id, lifecycle.DispatchStarted)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return fmt.Errorf("dispatch %s is not started: its task cannot change", id)
		}
		return nil
	})
}

// Outcome is a terminal state with everything recorded beside it.
type Outcome struct {
	State     string
	Reason    string
	Detail    string
	ExitCode  *int
	Isolation string
	Result    *Result
	Net       *proxy.Stats  // the egress proxy's counts, or nil
	Usage     *budget.Usage // the model gateway's counts, or nil
	// Verdict is the verify gate's verdict, or nil: written with the terminal state, and
	// audited as dispatch.verified in the same transaction, before the terminal entry.
	Verdict *verdict.Verdict
}

// Finish moves a live dispatch to its terminal state. It returns false (and changes nothing)
// when the dispatch is already terminal: exactly one terminal state is ever recorded.
func (s *Records) Finish(ctx context.Context, id string, o Outcome) (bool, error) {
	applied, _, err := s.finish(ctx, id, o)
	return applied, err
}

// finish is Finish returning the record as the transaction leaves it (terminal either way),
// read in that transaction: the supervisor's last report needs no query of its own.
func (s *Records) finish(ctx context.Context, id string, o Outcome) (applied bool, final *Record, err error) {
	return s.finishFrom(ctx, id, "", o)
}

// finishFrom is finish for an end decided by a process that is not the dispatch's supervisor
// (Reap): when supervisor is not "", it applies only while the record still names that
// supervisor, in the same transaction. Reap decides from a listing; a new supervisor may have
// claimed the dispatch since (Claim takes over one whose supervisor is gone), and its end is
// then that supervisor's to record.
func (s *Records) finishFrom(ctx context.Context, id, supervisor string, o Outcome) (applied bool, final *Record, err error) {
	if !lifecycle.DispatchEnded(o.State) {
		return false, nil, fmt.Errorf("finish dispatch %s: %q is not a terminal state", id, o.State)
	}
	err = s.db.Tx(ctx, func(tx *sql.Tx) error {
		applied, final = false, nil
		r, err := getRecord(ctx, s.prepared(tx), id)
		if err != nil {
			return err
		}
		if lifecycle.DispatchEnded(r.State) || (supervisor != "" && r.supervisor != supervisor) {
			final = r
			return nil
		}
		var result []byte
		if o.Result != nil {
			if result, err = json.Marshal(o.Result); err != nil {
				return err
			}
		}
		var exit any
		if o.ExitCode != nil {
			exit = *o.ExitCode
		}
		var netStats []byte
		if o.Net != nil {
			if netStats, err = json.Marshal(o.Net); err != nil {
				return err
			}
		}
		var usageJSON []byte
		if o.Usage != nil {
			if usageJSON, err = json.Marshal(o.Usage); err != nil {
				return err
			}
		}
		var verdictJSON []byte
		if o.Verdict != nil {
			if verdictJSON, err = json.Marshal(o.Verdict); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `
UPDATE dispatches SET state = ?, reason = ?, detail = ?, exit_code = ?, isolation = ?, result = ?, ended_at = ?, net = ?, usage = ?, verdict = ? WHERE id = ?`,
			o.State, o.Reason, o.Detail, exit, o.Isolation, string(result), ts(s.now()), string(netStats), string(usageJSON), string(verdictJSON), id); err != nil {
			return err
		}
		data := map[string]any{entry.KeyReason: o.Reason, entry.KeyDetail: o.Detail, "isolation": o.Isolation}
		if o.Net != nil {
			data["net"] = map[string]any{"reached": len(o.Net.Reached), "refused": len(o.Net.Refused),
				"bytes_up": o.Net.BytesUp, "bytes_down": o.Net.BytesDown}
		}
		if o.ExitCode != nil {
			data["exit_code"] = int64(*o.ExitCode)
		}
		if u := o.Usage; u != nil {
			// Cost in nano-dollars: the audit's canonical JSON holds integers only.
			data["usage"] = map[string]any{"input_tokens": u.InputTokens, "output_tokens": u.OutputTokens,
				"cached_tokens": u.CachedTokens, "model_calls": u.ModelCalls, "cost_nano_usd": int64(math.Round(u.CostUSD * 1e9))}
		}
		if o.Result != nil && o.Result.Patch != nil {
			data[entry.KeyPatchDigest] = string(o.Result.Patch.Digest)
		}
		if o.Result != nil && o.Result.Final != nil {
			// The answer a review is read from: the audit names the bytes it was.
			data[entry.KeyFinalDigest] = string(o.Result.Final.Digest)
		}
		if v := o.Verdict; v != nil {
			// The verdict is audited before the end it decided, in the same transaction; the
			// terminal entry and the manifest name its digest, so a bundle without the
			// dispatch.verified entry fails agora verify.
			data[entry.KeyVerdict] = v.Digest()
			vd := v.Details()
			vd[entry.KeyVerdict] = v.Digest()
			if _, err := s.log.Append(ctx, tx, audit.Entry{Actor: r.Actor, Kind: entry.DispatchVerified, Subject: entry.Dispatch(r.ID), Details: vd}); err != nil {
				return err
			}
		}
		ended := *r
		ended.State, ended.Reason, ended.Result, ended.Net, ended.Usage, ended.Verdict = o.State, o.Reason, o.Result, o.Net, o.Usage, o.Verdict
		manifest, err := Provenance(&ended)
		if err != nil {
			return err
		}
		data[entry.KeyManifest] = ProvenanceDigest(manifest)
		// A call still held has nobody left to wait for it (a supervisor that died holding
		// it): it expires with the dispatch, so every request has its one decision on record.
		for _, a := range r.Approvals {
			if a.State == ApprovalPending {
				if _, err := s.settle(ctx, tx, id, a, ApprovalExpired, "the dispatch ended ("+o.State+") before anyone decided", SystemActor); err != nil {
					return err
				}
			}
		}
		if err := s.event(ctx, tx, r, o.State, data); err != nil {
			return err
		}
		if final, err = getRecord(ctx, s.prepared(tx), id); err != nil {
			return err
		}
		applied = true
		return nil
	})
	if err != nil {
		return false, nil, err
	}
	return applied, final, nil
}

// Claim makes the calling process the supervisor of an accepted dispatch. It succeeds only
// when the recorded supervisor is this process, its parent (a detached supervisor takes over
// from the process that started it), or a process that no longer runs; the check and the
// update are one IMMEDIATE transaction, so of two processes racing to supervise the same
// dispatch exactly one wins and the other gets [ErrClaimed]. A dispatch that is no longer
// accepted cannot be claimed either.
func (s *Records) Claim(ctx context.Context, id string) error {
	self := selfSupervisor()
	parent := parentSupervisor()
	return s.db.Tx(ctx, func(tx *sql.Tx) error {
		var state, cur string
		err := tx.QueryRowContext(ctx, `SELECT state, supervisor FROM dispatches WHERE id = ?`, id).Scan(&state, &cur)
		if errors.Is(err, sql.ErrNoRows) {
			return errclass.NotFoundf(ErrNotFound, "dispatch", id)
		}
		if err != nil {
			return err
		}
		if state != lifecycle.DispatchAccepted {
			return fmt.Errorf("claim dispatch %s: it is %s: %w", id, state, ErrClaimed)
		}
		if cur != self && cur != parent && supervisorAlive(cur) {
			return fmt.Errorf("claim dispatch %s: process %s supervises it: %w", id, cur, ErrClaimed)
		}
		_, err = tx.ExecContext(ctx, `UPDATE dispatches SET supervisor = ? WHERE id = ?`, self, id)
		return err
	})
}

// Supervisor returns the process recorded as supervising id and whether it still runs.
func (s *Records) Supervisor(ctx context.Context, id string) (string, bool, error) {
	var cur string
	err := s.db.SQL().QueryRowContext(ctx, `SELECT supervisor FROM dispatches WHERE id = ?`, id).Scan(&cur)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, errclass.NotFoundf(ErrNotFound, "dispatch", id)
	}
	if err != nil {
		return "", false, err
	}
	return cur, supervisorAlive(cur), nil
}

// live returns the dispatches that are not terminal.
func (s *Records) live(ctx context.Context) ([]*Record, error) {
	rows, err := s.db.SQL().QueryContext(ctx, `SELECT `+recordColumns+` FROM dispatches WHERE state IN (?, ?)`, lifecycle.DispatchAccepted, lifecycle.DispatchStarted)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*Record
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// RequestCancel marks a live dispatch as to be cancelled and returns its record. The process
// supervising it sees the flag (or the provider's kill) and records the terminal state.
func (s *Records) RequestCancel(ctx context.Context, id string) (*Record, error) {
	var r *Record
	err := s.db.Tx(ctx, func(tx *sql.Tx) error {
		var err error
		if r, err = getRecord(ctx, s.prepared(tx), id); err != nil {
			return err
		}
		if lifecycle.DispatchEnded(r.State) {
			return nil
		}
		_, err = tx.ExecContext(ctx, `UPDATE dispatches SET cancel_requested = 1 WHERE id = ?`, id)
		r.cancelRequested = true
		return err
	})
	return r, err
}

// cancelRequested reports whether someone asked to cancel id.
func (s *Records) cancelRequested(ctx context.Context, id string) bool {
	var c bool
	err := s.db.SQL().QueryRowContext(ctx, `SELECT cancel_requested FROM dispatches WHERE id = ?`, id).Scan(&c)
	return err == nil && c
}

// prepared runs getRecord's queries on q through the statements s prepared.
func (s *Records) prepared(q queryer) queryer { return prepared{q: q, c: s.stmts} }
