package orch

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/agora-dev/agora/internal/orch/plan"
)

// Slot is the slot of a schedule a run is submitted for. Its run's id is [Slot.RunID], chosen
// before the run exists, so submitting the same slot twice (a scheduler that crashed after
// submitting and before marking the slot fired) finds the run of the first.
type Slot struct {
	Schedule string    // the schedule's name
	At       time.Time // when the slot was due
	// Missed is how many earlier slots of the schedule came and went without a run of their
	// own (serve was down) and were coalesced into this one.
	Missed int
}

// SlotRunID is the id of the run of schedule's slot at: NAME@<the slot in UTC, RFC 3339>.
func SlotRunID(schedule string, at time.Time) string {
	return schedule + "@" + at.UTC().Format(time.RFC3339)
}

// RunID is the id of the slot's run.
func (s Slot) RunID() string { return SlotRunID(s.Schedule, s.At) }

// SubmitSlot starts the run of a schedule's slot, with id slot.RunID(), or returns the run of
// that id with created false when it exists (whatever its plan: the slot has its run). It
// skips the identity check [Engine.Submit] makes: the same plan on the same commit is a new
// run in each slot. p must be validated as for Submit.
func (e *Engine) SubmitSlot(ctx context.Context, p *plan.Plan, co Checkout, actor string, slot Slot) (runID string, created bool, err error) {
	reply := make(chan submitResult, 1)
	cmd := submitCmd{p: p, workspace: co.Workspace, repo: co.Repo, revision: co.Revision, subagents: co.Subagents, actor: actor,
		trace: co.Trace, reply: reply, slot: &slot}
	if err := e.send(ctx, cmd); err != nil {
		return "", false, err
	}
	r, err := await(ctx, e, reply)
	if err != nil {
		return "", false, err
	}
	return r.runID, r.created, r.err
}

// runByID reports whether run id exists, in memory (a run of this batch is not committed yet)
// or in the database.
func (e *Engine) runByID(id string) (string, error) {
	if _, ok := e.runs[id]; ok {
		return id, nil
	}
	var found string
	err := e.db.SQL().QueryRowContext(context.Background(), `SELECT id FROM runs WHERE id = ?`, id).Scan(&found)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return found, err
}

// slotDetails adds a scheduled run's slot to its orch.run.submitted entry (only then, so a
// run submitted by hand is recorded exactly as before).
func slotDetails(s *Slot, details map[string]any) {
	if s == nil {
		return
	}
	details["schedule"] = s.Schedule
	details["slot"] = s.At.UTC().Format(time.RFC3339)
	details["missed"] = int64(s.Missed)
}
