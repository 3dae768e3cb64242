package service_test

import (
	"context"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/cron"
	"github.com/agora-dev/agora/internal/orch/plan"
	"github.com/agora-dev/agora/internal/orch/service"
	"github.com/agora-dev/agora/internal/store"
)

// bubbleServe is serve's engine and scheduler over one orch.db, inside a synctest bubble: the
// scheduler's clock is the bubble's, so its timer sleeps until a slot in fake time, and a test
// moves the clock by sleeping.
type bubbleServe struct {
	db    *store.DB
	eng   *orch.Engine
	sched *service.Scheduler
	stop  func()
}

// serveInBubble starts the engine and the scheduler on path; stop ends both and closes the
// database (a SIGTERM'd serve).
func serveInBubble(t *testing.T, path string) *bubbleServe {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	db, err := store.Open(ctx, path, orch.Migrations(), store.FullSync())
	if err != nil {
		t.Fatal(err)
	}
	eng, err := orch.Open(ctx, db, audit.New(nil), instantExec{}, orch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Real time is the bubble's: its clock only moves as the test sleeps.
	start := time.Now()
	sched := &service.Scheduler{Server: &service.Server{Engine: eng}, Table: cron.NewTable(db, audit.New(nil)), Now: time.Now,
		Uptime: func() time.Duration { return time.Since(start) }}
	done := make(chan struct{}, 2)
	go func() { eng.Run(ctx); done <- struct{}{} }()
	go func() { sched.Run(ctx); done <- struct{}{} }()
	s := &bubbleServe{db: db, eng: eng, sched: sched}
	stopped := false
	s.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		<-done
		<-done
		db.Close()
	}
	t.Cleanup(s.stop)
	return s
}

// addHourly adds schedule name, @hourly in UTC, of a one-task plan, as of now.
func (s *bubbleServe) addHourly(t *testing.T, name string) {
	t.Helper()
	p, err := plan.Parse("p.yaml", []byte("version: 1\nname: "+name+"\ntasks: [{id: a, subagent: worker}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	spec, err := cron.Parse("@hourly", "UTC")
	if err != nil {
		t.Fatal(err)
	}
	sch := &cron.Schedule{Name: name, Spec: spec, Plan: p.Canonical(), Digest: p.Digest(), Actor: "tester", PlanName: p.Name, Tasks: 1}
	if err := s.sched.Table.Add(context.Background(), sch, time.Now()); err != nil {
		t.Fatal(err)
	}
	s.sched.Wake()
}

func (s *bubbleServe) schedule(t *testing.T, name string) *cron.Schedule {
	t.Helper()
	sch, err := s.sched.Table.Get(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

// sleepUntil moves the bubble's clock to at and lets everything due by then finish.
func sleepUntil(at time.Time) {
	time.Sleep(time.Until(at))
	synctest.Wait()
}

// TestScheduler_SlotsOnTheClock runs the scheduler on a fake clock: an hourly schedule's slot
// fires at the hour, not a moment before or after (the scheduler sleeps until the earliest
// next slot); with serve stopped across three slots, the next serve gives the latest of them one
// catch-up run that says two were missed (audited as orch.schedule.missed), and the slot after
// fires at its hour with none missed.
func TestScheduler_SlotsOnTheClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "orch.db")
		hour := time.Now().UTC().Truncate(time.Hour)
		at := func(h int, d time.Duration) time.Time { return hour.Add(time.Duration(h)*time.Hour + d) }
		s := serveInBubble(t, path)
		// Added off the minute: the scheduler's minute-long bound on each wait (MaxWait) does
		// not land on the hour, only its timer for the slot does.
		sleepUntil(at(0, 30*time.Minute+30*time.Second))
		s.addHourly(t, "hourly")

		sleepUntil(at(1, -time.Nanosecond))
		if sch := s.schedule(t, "hourly"); sch.LastRun != "" {
			t.Fatalf("slot %s fired before its hour: run %s", sch.LastSlot, sch.LastRun)
		}
		sleepUntil(at(1, 0))
		first := "hourly@" + at(1, 0).Format(time.RFC3339)
		if sch := s.schedule(t, "hourly"); sch.LastRun != first {
			t.Fatalf("at the hour the last run is %q, want %s", sch.LastRun, first)
		}

		s.stop() // 02:00, 03:00 and 04:00 come while serve is down
		sleepUntil(at(4, 10*time.Minute))
		s = serveInBubble(t, path)
		synctest.Wait()
		catchUp := "hourly@" + at(4, 0).Format(time.RFC3339)
		if sch := s.schedule(t, "hourly"); sch.LastRun != catchUp {
			t.Fatalf("after three missed slots the last run is %q, want the catch-up run %s", sch.LastRun, catchUp)
		}
		db := s.db.SQL()
		if n := count(t, db, `SELECT COUNT(*) FROM runs WHERE schedule = 'hourly'`); n != 2 {
			t.Errorf("%d runs after one slot and three missed, want 2 (one catch-up run)", n)
		}
		r, err := s.eng.Status(context.Background(), catchUp)
		if err != nil {
			t.Fatal(err)
		}
		if r.Missed != 2 || r.Schedule != "hourly" || r.Slot == nil || !r.Slot.Equal(at(4, 0)) || r.State != lifecycle.RunSucceeded {
			t.Errorf("the catch-up run: missed %d, schedule %q, slot %v, %s; want 2 missed, hourly, %s, succeeded", r.Missed, r.Schedule, r.Slot, r.State, at(4, 0))
		}
		missed := entries(t, db, "orch.schedule.missed", "schedule/hourly")
		if len(missed) != 1 || missed[0]["missed"] != float64(2) || missed[0]["slot"] != at(4, 0).Format(time.RFC3339) {
			t.Errorf("orch.schedule.missed entries %v, want one of 2 for %s", missed, at(4, 0).Format(time.RFC3339))
		}

		sleepUntil(at(5, -time.Nanosecond))
		if sch := s.schedule(t, "hourly"); sch.LastRun != catchUp {
			t.Fatalf("the 05:00 slot fired early: run %s", sch.LastRun)
		}
		sleepUntil(at(5, 0))
		next := "hourly@" + at(5, 0).Format(time.RFC3339)
		if r, err = s.eng.Status(context.Background(), next); err != nil {
			t.Fatalf("the slot after the catch-up: %v", err)
		}
		if r.Missed != 0 || r.State != lifecycle.RunSucceeded {
			t.Errorf("the slot after the catch-up: missed %d, %s", r.Missed, r.State)
		}
	})
}
