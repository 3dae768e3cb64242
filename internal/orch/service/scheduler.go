package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/cron"
	"golang.org/x/sys/unix"
)

// Scheduler fires the slots of the schedules in orch.db. It keeps one timer, for the
// earliest next slot of any schedule (read from the next_due index), and wakes early only when
// a schedule is added or removed: an idle table costs nothing between slots, however large.
//
// A due slot is fired by submitting its run (id NAME@SLOT) through the engine, then marking
// the slot fired in the schedules table. A crash between the two leaves a run whose slot is
// not marked: the next scheduler finds it (cron.Table.UnmarkedRun) and marks it, and were it
// to submit the slot again the engine would answer with the same run. So a slot gets exactly
// one run, however serve is stopped.
type Scheduler struct {
	Server *Server
	Table  *cron.Table
	Now    func() time.Time
	// MaxWait bounds each wait (default a minute: a wall clock that jumps, or a host that
	// slept, is noticed within it).
	MaxWait time.Duration
	// TestOnlyCrash, when set, is called at each step of firing a slot ("before-submit",
	// "after-submit", "after-mark"); tests stop serve there with SIGKILL.
	TestOnlyCrash func(point string)
	Log           *slog.Logger
	// Uptime is how much real time has passed, read from a clock no one sets (nil:
	// CLOCK_BOOTTIME, which counts a suspended host's sleep as Go's monotonic clock does
	// not). Between two looks it is what really passed, whatever Now says: a slot the wall
	// clock jumped over is fired but not counted as missed.
	Uptime func() time.Duration

	once sync.Once
	wake chan struct{} // made once (init)

	// The last look at the table: Now then, and Uptime then (Run's goroutine only).
	lookWall time.Time
	lookUp   time.Duration
	looked   bool
}

// defaultMaxWait is the longest the scheduler sleeps without looking at the table again.
const defaultMaxWait = time.Minute

// dueBatch is how many due schedules one look at the table fires.
const dueBatch = 64

// retryAfterError is how long the scheduler waits after a failed look at the table.
const retryAfterError = 5 * time.Second

// Wake makes the scheduler look at the table again now (a schedule was added or removed).
func (s *Scheduler) Wake() {
	s.init()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Scheduler) init() {
	s.once.Do(func() { s.wake = make(chan struct{}, 1) })
}

// Run fires due slots until ctx ends or the engine stops.
func (s *Scheduler) Run(ctx context.Context) error {
	s.init()
	maxWait := s.MaxWait
	if maxWait <= 0 {
		maxWait = defaultMaxWait
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		wait := maxWait
		if err := s.fireDue(ctx); err != nil {
			if errors.Is(err, orch.ErrStopped) || ctx.Err() != nil {
				return nil
			}
			s.log().Error("schedules: fire due slots", "err", err)
			wait = retryAfterError
		} else if at, ok, err := s.Table.Earliest(ctx); err != nil {
			s.log().Error("schedules: read the next slot", "err", err)
			wait = retryAfterError
		} else if ok {
			wait = min(max(at.Sub(s.Now()), 0), maxWait)
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return nil
		case <-s.wake:
			if !timer.Stop() {
				<-timer.C
			}
		case <-timer.C:
		}
	}
}

func (s *Scheduler) log() *slog.Logger {
	if s.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Log
}

// fireDue fires every schedule whose next slot has come.
func (s *Scheduler) fireDue(ctx context.Context) error {
	// A clock that went back past slots fired while it was ahead: recount those schedules'
	// next slots from now (audited), or nothing would fire until real time passed them.
	moved, err := s.Table.ClockBack(ctx, s.Now())
	if err != nil {
		return err
	}
	for _, sch := range moved {
		s.log().Warn("schedule: the clock is earlier than its last slot; its next slot is counted from now",
			"schedule", sch.Name, "last_slot", sch.LastSlot)
	}
	// What the wall clock should say if it only moved as real time did since the last look.
	up := s.uptime()
	var trusted time.Time
	if s.looked {
		trusted = s.lookWall.Add(up - s.lookUp)
	}
	s.lookWall, s.lookUp, s.looked = s.Now(), up, true
	for {
		now := s.Now()
		due, err := s.Table.DueBy(ctx, now, dueBatch)
		if err != nil {
			return err
		}
		for _, sch := range due {
			if err := s.fire(ctx, sch, now, trusted); err != nil {
				return err
			}
		}
		if len(due) < dueBatch {
			return nil
		}
	}
}

// clockSlack is how far the wall clock may run ahead of the real time measured between two
// looks before the slots in between count as not passed: NTP's slewing and a look's own
// time stay well under it.
const clockSlack = time.Minute

// uptime is Uptime, or CLOCK_BOOTTIME.
func (s *Scheduler) uptime() time.Duration {
	if s.Uptime != nil {
		return s.Uptime()
	}
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return time.Duration(time.Now().UnixNano()) // never on Linux; the wall clock then
	}
	return time.Duration(ts.Nano())
}

// reallyMissed is how many of the missed slots before slot (fired at now, counted from
// from) really passed: those at or before trusted, the wall time real time reached since the
// last look. A wall clock that jumped ahead skips slots that did not come; they are not
// missed. Zero trusted (no look before: serve just started) trusts the wall clock.
func reallyMissed(spec *cron.Spec, from, now, trusted, slot time.Time, missed int) int {
	if trusted.IsZero() || !trusted.Add(clockSlack).Before(now) {
		return missed
	}
	latest, before, ok := spec.Due(from, trusted)
	switch {
	case !ok:
		return 0
	case latest.Before(slot):
		return min(before+1, missed)
	}
	return missed
}

// fire gives schedule sch's due slot its run, or marks it refused when its plan no longer
// validates (a subagent it names was retired, its workspace is gone); the schedule goes on to
// its next slot either way.
func (s *Scheduler) fire(ctx context.Context, sch *cron.Schedule, now, trusted time.Time) error {
	// A run submitted before a crash, its slot never marked: mark it now.
	if id, slot, missed, ok, err := s.Table.UnmarkedRun(ctx, sch, now); err != nil {
		return err
	} else if ok {
		_, err := s.Table.Mark(ctx, sch, cron.Firing{Slot: slot, Missed: missed, RunID: id, Recovered: true})
		s.log().Info("schedule slot recovered", "schedule", sch.Name, "slot", slot, "run_id", id)
		return err
	}
	slot, missed, ok := sch.Spec.Due(sch.From(now), now)
	if !ok {
		// Its next_due said due and no slot is: the clock went back, or the zone's rules
		// changed. Point it at its real next slot.
		return s.Table.Repoint(ctx, sch, now)
	}
	jumped := 0
	if real := reallyMissed(sch.Spec, sch.From(now), now, trusted, slot, missed); real != missed {
		s.log().Warn("schedule: the clock is ahead of the time that passed since the last look; the slots it jumped over are not counted as missed",
			"schedule", sch.Name, "slot", slot, "clock", now, "measured", trusted, "missed", real, "jumped_over", missed-real)
		jumped, missed = missed-real, real
	}
	src, err := s.Table.Plan(ctx, sch)
	if err != nil {
		return err
	}
	p, co, err := s.Server.prepare(ctx, api.SubmitRequest{File: "schedule " + sch.Name, Source: src,
		Workspace: sch.Workspace, Revision: sch.Revision})
	if err == nil && p.Digest() != sch.Digest {
		err = fmt.Errorf("the stored plan's digest is %s, not the %s it was added with", p.Digest(), sch.Digest)
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.log().Warn("schedule slot refused", "schedule", sch.Name, "slot", slot, "err", err)
		_, err := s.Table.Mark(ctx, sch, cron.Firing{Slot: slot, Missed: missed, JumpedOver: jumped, Error: err.Error()})
		return err
	}
	s.crashPoint("before-submit")
	id, created, err := s.Server.Engine.SubmitSlot(ctx, p, co, sch.Actor+" via schedule/"+sch.Name,
		orch.Slot{Schedule: sch.Name, At: slot, Missed: missed})
	if err != nil {
		return err
	}
	s.crashPoint("after-submit")
	if !created {
		// The slot's id names a run already. Of another plan, it is the run of a schedule
		// of this name that was removed (while the clock was behind the slot it fired): a
		// slot never runs twice, so this one is refused, saying so, rather than recorded as
		// fired with a plan it never had.
		r, err := s.Server.Engine.Status(ctx, id)
		if err != nil {
			return err
		}
		if r.PlanDigest != sch.Digest {
			why := fmt.Sprintf("slot %s already has run %s, of another plan (%s) of a schedule named %q that was removed; a slot never runs twice",
				slot.UTC().Format(time.RFC3339), id, r.PlanDigest, sch.Name)
			s.log().Warn("schedule slot refused", "schedule", sch.Name, "slot", slot, "err", why)
			_, err := s.Table.Mark(ctx, sch, cron.Firing{Slot: slot, Missed: missed, JumpedOver: jumped, Error: why})
			return err
		}
	}
	if _, err := s.Table.Mark(ctx, sch, cron.Firing{Slot: slot, Missed: missed, JumpedOver: jumped, RunID: id, Created: created}); err != nil {
		return err
	}
	s.crashPoint("after-mark")
	s.log().Info("schedule slot fired", "schedule", sch.Name, "slot", slot, "run_id", id, "missed", missed, "created", created)
	return nil
}

func (s *Scheduler) crashPoint(point string) {
	if s.TestOnlyCrash != nil {
		s.TestOnlyCrash(point)
	}
}
