package cron

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/errclass"
	"github.com/agora-dev/agora/internal/store"
)

// Schedule is one standing order: run Plan at every slot of Spec.
type Schedule struct {
	Name string
	Spec *Spec
	// Plan is the canonical plan, validated when the schedule was added; only [Table.Add]
	// reads it here (a plan may be 16 MiB: [Table.Plan] reads one when its slot fires).
	Plan   []byte
	Digest string // the plan's digest
	// PlanName, Queue and Tasks summarise the plan for lists, which never read plans.
	PlanName, Queue string
	Tasks           int
	// Workspace and Revision are what the person named when adding it (NAME or
	// NAME@sha256:HEX, and a branch, tag or commit), resolved again at each slot; "" when
	// the plan names its own or none.
	Workspace, Revision string
	Actor               string // who added it
	CreatedAt           time.Time
	LastSlot            time.Time // the latest slot fired or refused; zero: none yet
	LastRun             string    // the run of LastSlot; "" when it was refused
	LastError           string    // why LastSlot was refused
	NextDue             time.Time // the first slot after LastSlot (or after CreatedAt)
}

// After is the time the schedule's next slots are counted from: its last slot, or when it
// was added.
func (s *Schedule) After() time.Time {
	if s.LastSlot.IsZero() {
		return s.CreatedAt
	}
	return s.LastSlot
}

// From is where s's slots due at now are counted from: [Schedule.After], unless that is later
// than now (the clock went back past a slot that fired while it was ahead). Then the slots
// come from the next slot [Table.ClockBack] counted from the time the clock came back (when
// it is due), else from now; a slot fired before still never runs twice, by its run id.
func (s *Schedule) From(now time.Time) time.Time {
	a := s.After()
	if !a.After(now) {
		return a
	}
	if !s.NextDue.IsZero() && !s.NextDue.After(now) {
		return s.NextDue.Add(-time.Nanosecond)
	}
	return now
}

// Firing is what became of a due slot.
type Firing struct {
	Slot   time.Time // the latest slot due: the one run
	Missed int       // earlier due slots coalesced into it
	RunID  string    // its run; "" when refused
	// Created is false when the run existed already (a resubmission after a crash between
	// submit and mark); Recovered is true when the scheduler found the run of an unmarked
	// slot at start and only marks it now.
	Created, Recovered bool
	Error              string // why the slot was refused (its plan no longer validates), "" when it ran
	// JumpedOver counts the earlier slots the wall clock jumped over in less real time than
	// they span (the scheduler measures it): not counted in Missed, said in the entry.
	// A clock that was ahead jumped over slots that did not come; one that was behind and
	// was corrected, over slots that did: the entry says what the scheduler cannot tell.
	JumpedOver int
}

// ErrExists matches adding a schedule under a name in use (invalid input: nothing is added);
// ErrNotFound, naming one that is not.
var (
	ErrExists   = errclass.AsInvalid(errors.New("schedule exists"))
	ErrNotFound = errors.New("schedule not found")
)

// MaxNameLen bounds a schedule's name, which becomes part of its runs' ids (NAME@SLOT).
const MaxNameLen = 63

var namePattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`) })

// CheckName checks the form of a schedule's name.
func CheckName(name string) error {
	if !namePattern().MatchString(name) {
		return fmt.Errorf("invalid schedule name %q: use 1-%d lowercase letters, digits, '_' or '-', starting with a letter or digit", clip(name), MaxNameLen)
	}
	return nil
}

// Table is the schedules table of orch.db. Every change is written with its audit entry
// (subject schedule/NAME) in one transaction.
type Table struct {
	db  *store.DB
	log *audit.Log
}

// NewTable returns the table of db, recording in log.
func NewTable(db *store.DB, log *audit.Log) *Table { return &Table{db: db, log: log} }

// tsLayout sorts as text (fixed-width fraction), as orch.db's other times do.
const tsLayout = "2006-01-02T15:04:05.000000000Z07:00"

func ts(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(tsLayout)
}

func parseTS(s string) time.Time {
	if s == "" {
		return time.Time{}
	}
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t.UTC()
}

// never is next_due of a schedule with no slot left (Parse refuses such specs; kept for a
// zone whose rules changed): it sorts after every real time.
const never = "9999-12-31T23:59:59.999999999Z"

func dueText(t time.Time) string {
	if t.IsZero() {
		return never
	}
	return ts(t)
}

func (t *Table) append(ctx context.Context, tx *sql.Tx, name, kind string, details map[string]any) error {
	_, err := t.log.AppendAll(ctx, tx, []audit.Entry{{Actor: entry.OrchActor, Kind: kind, Subject: entry.Schedule(name), Details: details}})
	return err
}

// Add stores s, with its next slot after now, and records orch.schedule.added. A name in use
// is refused with [ErrExists].
func (t *Table) Add(ctx context.Context, s *Schedule, now time.Time) error {
	if err := CheckName(s.Name); err != nil {
		return err
	}
	s.CreatedAt = now.UTC()
	s.NextDue = s.Spec.Next(now)
	return t.db.Tx(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM schedules WHERE name = ?`, s.Name).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("%w: %q; remove it first ('agora orch schedule remove %s') or choose another name", ErrExists, s.Name, s.Name)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schedules(name, spec, zone, plan, digest, workspace, revision, actor, created_at, next_due,
			plan_name, queue, tasks)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, s.Name, s.Spec.String(), s.Spec.Zone(), s.Plan, s.Digest, s.Workspace, s.Revision,
			s.Actor, ts(s.CreatedAt), dueText(s.NextDue), s.PlanName, s.Queue, s.Tasks); err != nil {
			return err
		}
		return t.append(ctx, tx, s.Name, entry.ScheduleAdded, map[string]any{
			entry.KeyBy: s.Actor, "spec": s.Spec.String(), "zone": s.Spec.Zone(), entry.KeyPlanDigest: s.Digest,
			"workspace": s.Workspace, "revision": s.Revision, "next_due": ts(s.NextDue),
		})
	})
}

// Remove deletes schedule name and records orch.schedule.removed. Runs it started are not
// touched.
func (t *Table) Remove(ctx context.Context, name, actor string) error {
	return t.db.Tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM schedules WHERE name = ?`, name)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return errclass.NotFoundf(ErrNotFound, "schedule", name)
		}
		return t.append(ctx, tx, name, entry.ScheduleRemoved, map[string]any{entry.KeyBy: actor})
	})
}

// columns are what a schedule is read with: everything but its plan.
const columns = `name, spec, zone, digest, workspace, revision, actor, created_at, last_slot, last_run, last_error, next_due,
	plan_name, queue, tasks`

func scan(row interface{ Scan(...any) error }) (*Schedule, error) {
	var s Schedule
	var spec, zone, created, last, next string
	if err := row.Scan(&s.Name, &spec, &zone, &s.Digest, &s.Workspace, &s.Revision, &s.Actor, &created, &last,
		&s.LastRun, &s.LastError, &next, &s.PlanName, &s.Queue, &s.Tasks); err != nil {
		return nil, err
	}
	sp, err := Parse(spec, zone)
	if err != nil {
		return nil, fmt.Errorf("schedule %q: its stored spec no longer parses: %w", s.Name, err)
	}
	s.Spec = sp
	s.CreatedAt, s.LastSlot = parseTS(created), parseTS(last)
	if next != never {
		s.NextDue = parseTS(next)
	}
	return &s, nil
}

// Get returns schedule name, or an error matching [ErrNotFound].
func (t *Table) Get(ctx context.Context, name string) (*Schedule, error) {
	s, err := scan(t.db.SQL().QueryRowContext(ctx, `SELECT `+columns+` FROM schedules WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errclass.NotFoundf(ErrNotFound, "schedule", name)
	}
	return s, err
}

// Plan reads s's canonical plan (the scheduler checks it against s.Digest once parsed).
func (t *Table) Plan(ctx context.Context, s *Schedule) ([]byte, error) {
	var b []byte
	err := t.db.SQL().QueryRowContext(ctx, `SELECT plan FROM schedules WHERE name = ? AND created_at = ?`, s.Name, ts(s.CreatedAt)).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errclass.NotFoundf(ErrNotFound, "schedule", s.Name)
	}
	return b, err
}

// List returns every schedule by name.
func (t *Table) List(ctx context.Context) ([]*Schedule, error) {
	return t.query(ctx, `SELECT `+columns+` FROM schedules ORDER BY name`)
}

// DueBy returns at most limit schedules whose next slot is at or before now, earliest first:
// an index range, whatever the table holds besides.
func (t *Table) DueBy(ctx context.Context, now time.Time, limit int) ([]*Schedule, error) {
	return t.query(ctx, `SELECT `+columns+` FROM schedules WHERE next_due <= ? ORDER BY next_due, name LIMIT ?`, ts(now), limit)
}

func (t *Table) query(ctx context.Context, q string, args ...any) ([]*Schedule, error) {
	rows, err := t.db.SQL().QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*Schedule
	for rows.Next() {
		s, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// Earliest is the earliest next slot of any schedule (one index lookup); ok is false when
// there is none.
func (t *Table) Earliest(ctx context.Context) (at time.Time, ok bool, err error) {
	var next string
	err = t.db.SQL().QueryRowContext(ctx, `SELECT next_due FROM schedules ORDER BY next_due LIMIT 1`).Scan(&next)
	if errors.Is(err, sql.ErrNoRows) || next == never {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, err
	}
	return parseTS(next), true, nil
}

// Mark records what became of s's due slot: its last slot, run (or refusal) and next slot,
// with orch.schedule.missed (when slots were coalesced) and orch.schedule.fired (or
// orch.schedule.refused) in the same transaction. It changes nothing, and reports false,
// when s was removed, re-added or marked by someone else since it was read.
func (t *Table) Mark(ctx context.Context, s *Schedule, f Firing) (bool, error) {
	next := s.Spec.Next(f.Slot)
	marked := false
	err := t.db.Tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE schedules SET last_slot = ?, last_run = ?, last_error = ?, next_due = ?
			WHERE name = ? AND created_at = ? AND last_slot = ?`,
			ts(f.Slot), f.RunID, f.Error, dueText(next), s.Name, ts(s.CreatedAt), ts(s.LastSlot))
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil
		}
		marked = true
		slot := f.Slot.UTC().Format(time.RFC3339)
		if f.Missed > 0 {
			if err := t.append(ctx, tx, s.Name, entry.ScheduleMissed, map[string]any{
				"missed": int64(f.Missed), "after": s.From(f.Slot).UTC().Format(time.RFC3339), "slot": slot,
			}); err != nil {
				return err
			}
		}
		var details map[string]any
		if f.Error != "" {
			details = map[string]any{"slot": slot, "missed": int64(f.Missed), "error": f.Error, "next_due": ts(next)}
		} else {
			details = map[string]any{"slot": slot, "run_id": f.RunID, "missed": int64(f.Missed), "created": f.Created,
				"recovered": f.Recovered, "next_due": ts(next)}
		}
		if f.JumpedOver > 0 {
			details["jumped_over"] = int64(f.JumpedOver) // only then: every other entry's bytes stay
		}
		if f.Error != "" {
			return t.append(ctx, tx, s.Name, entry.ScheduleRefused, details)
		}
		return t.append(ctx, tx, s.Name, entry.ScheduleFired, details)
	})
	return marked, err
}

// Repoint moves s's next slot to the first one after [Schedule.From] now (its last, or now
// after the clock went back, or once its zone's rules changed) without firing anything.
func (t *Table) Repoint(ctx context.Context, s *Schedule, now time.Time) error {
	// Through Tx like every other write, so the leader fence (store.SetFence) covers it too.
	return t.db.Tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE schedules SET next_due = ? WHERE name = ? AND created_at = ? AND last_slot = ?`,
			dueText(s.Spec.Next(s.From(now))), s.Name, ts(s.CreatedAt), ts(s.LastSlot))
		return err
	})
}

// clockBackSlack is how far the clock may step back behind a slot just fired before ClockBack
// recounts: a step of seconds (NTP) changes no slot.
const clockBackSlack = time.Minute

// ClockBack finds the schedules whose last slot is later than now and whose next slot was
// still counted from it (a slot fired while the clock was ahead: nothing would fire until
// real time passed it), points each at its first slot after now and records
// orch.schedule.clock_back with it, in one transaction each. It returns the schedules moved.
func (t *Table) ClockBack(ctx context.Context, now time.Time) ([]*Schedule, error) {
	ahead, err := t.query(ctx, `SELECT `+columns+` FROM schedules WHERE last_slot > ? AND next_due > last_slot ORDER BY name`, ts(now.Add(clockBackSlack)))
	if err != nil {
		return nil, err
	}
	var moved []*Schedule
	for _, s := range ahead {
		next := s.Spec.Next(now)
		if s.NextDue.Equal(next) {
			continue // counted from the clock's return already (a last slot off its spec's grid)
		}
		err := t.db.Tx(ctx, func(tx *sql.Tx) error {
			res, err := tx.ExecContext(ctx, `UPDATE schedules SET next_due = ? WHERE name = ? AND created_at = ? AND last_slot = ?`,
				dueText(next), s.Name, ts(s.CreatedAt), ts(s.LastSlot))
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n == 0 {
				return nil // removed or marked since it was read
			}
			moved = append(moved, s)
			return t.append(ctx, tx, s.Name, entry.ScheduleClockBack, map[string]any{
				"last_slot": s.LastSlot.UTC().Format(time.RFC3339), "now": now.UTC().Format(time.RFC3339Nano), "next_due": ts(next),
			})
		})
		if err != nil {
			return moved, err
		}
	}
	return moved, nil
}

// UnmarkedRun finds a run of s submitted for a slot after its last one, at or before now, and
// not marked (the scheduler stopped between submitting it and marking its slot): its id, slot
// and missed count. ok is false when there is none.
func (t *Table) UnmarkedRun(ctx context.Context, s *Schedule, now time.Time) (id string, slot time.Time, missed int, ok bool, err error) {
	var at string
	// After its last slot, or after it was added when it has none: a run of an earlier
	// schedule of the same name is for a slot before this one was added. At or before now: a
	// run for a later slot was fired while the clock was ahead, and comes again when its slot
	// does (the same run, by its id).
	// Only a run this schedule submitted: its orch.run.submitted entry comes after the
	// schedule's latest orch.schedule.added in the log (audit order, which no clock moves).
	// A schedule removed and added again under its name while the clock was behind a slot
	// the first one fired left that run, which is not this schedule's (46c).
	err = t.db.SQL().QueryRowContext(ctx, `SELECT r.id, r.slot, r.missed FROM runs r
		WHERE r.schedule = ? AND r.slot > ? AND r.slot <= ? AND r.digest = ?
		AND (SELECT MIN(seq) FROM audit_entries WHERE subject = 'run/' || r.id AND kind = ?) >
			(SELECT COALESCE(MAX(seq), 0) FROM audit_entries WHERE subject = ? AND kind = ?)
		ORDER BY r.slot DESC LIMIT 1`, s.Name, ts(s.After()), ts(now), s.Digest,
		entry.RunSubmitted, entry.Schedule(s.Name), entry.ScheduleAdded).Scan(&id, &at, &missed)
	if errors.Is(err, sql.ErrNoRows) {
		return "", time.Time{}, 0, false, nil
	}
	if err != nil {
		return "", time.Time{}, 0, false, err
	}
	return id, parseTS(at), missed, true, nil
}

// Runs lists the runs schedule name started, newest slot first, at most limit: id, state and
// slot, as `agora orch schedule show` prints them.
func (t *Table) Runs(ctx context.Context, name string, limit int) ([]RunRef, error) {
	rows, err := t.db.SQL().QueryContext(ctx, `SELECT id, state, slot, missed FROM runs WHERE schedule = ? ORDER BY slot DESC LIMIT ?`, name, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []RunRef
	for rows.Next() {
		var r RunRef
		var at string
		if err := rows.Scan(&r.ID, &r.State, &at, &r.Missed); err != nil {
			return nil, err
		}
		r.Slot = parseTS(at)
		out = append(out, r)
	}
	return out, rows.Err()
}

// RunRef is one run a schedule started.
type RunRef struct {
	ID     string
	State  string
	Slot   time.Time
	Missed int
}
