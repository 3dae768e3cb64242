package service_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/cron"
	"github.com/agora-dev/agora/internal/orch/plan"
	"github.com/agora-dev/agora/internal/orch/service"
	"github.com/agora-dev/agora/internal/store"
)

// Schedules when the clock goes back (scheduler.go fireDue/fire, cron/table.go
// ClockBack, From, UnmarkedRun), in-process on a synctest clock plus an offset the test moves
// (the host's clock stepping).

type skewServe struct {
	*bubbleServe
	off *atomic.Int64
}

func (s *skewServe) now() time.Time { return time.Now().Add(time.Duration(s.off.Load())) }

// step sets the host clock to at (an offset on the bubble's clock), wakes the scheduler and
// lets it finish.
func (s *skewServe) step(at time.Time) {
	s.off.Store(int64(at.Sub(time.Now())))
	s.sched.Wake()
	synctest.Wait()
}

func serveSkewed(t *testing.T, path string) *skewServe {
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
	ss := &skewServe{off: new(atomic.Int64)}
	// The host's clock is skewed (ss.now); real time is the bubble's.
	start := time.Now()
	sched := &service.Scheduler{Server: &service.Server{Engine: eng}, Table: cron.NewTable(db, audit.New(nil)), Now: ss.now,
		Uptime: func() time.Duration { return time.Since(start) }}
	done := make(chan struct{}, 2)
	go func() { eng.Run(ctx); done <- struct{}{} }()
	go func() { sched.Run(ctx); done <- struct{}{} }()
	b := &bubbleServe{db: db, eng: eng, sched: sched}
	stopped := false
	b.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		<-done
		<-done
		db.Close()
	}
	t.Cleanup(b.stop)
	ss.bubbleServe = b
	return ss
}

// add adds schedule name, @hourly UTC, of a one-task plan named planName, as of the host clock.
func (s *skewServe) add(t *testing.T, name, planName string) string {
	t.Helper()
	p, err := plan.Parse("p.yaml", []byte("version: 1\nname: "+planName+"\ntasks: [{id: a, subagent: worker}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	spec, err := cron.Parse("@hourly", "UTC")
	if err != nil {
		t.Fatal(err)
	}
	sch := &cron.Schedule{Name: name, Spec: spec, Plan: p.Canonical(), Digest: p.Digest(), Actor: "tester", PlanName: p.Name, Tasks: 1}
	if err := s.sched.Table.Add(context.Background(), sch, s.now()); err != nil {
		t.Fatal(err)
	}
	s.sched.Wake()
	synctest.Wait()
	return p.Digest()
}

// TestRedTeam46xClock_BackAndForthOneRunPerSlot: the clock jumps 5 hours ahead (05:00 fires,
// 4 coalesced), back (01:00-04:00 fire on time), ahead again past 05:00 and back again: no
// slot has two runs, and 05:00 is answered by its first run; the clock_back entry is written
// once per time the clock went back, not at every look.
func TestRedTeam46xClock_BackAndForthOneRunPerSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := serveSkewed(t, filepath.Join(t.TempDir(), "orch.db"))
		hour := time.Now().UTC().Truncate(time.Hour)
		at := func(h int, d time.Duration) time.Time { return hour.Add(time.Duration(h)*time.Hour + d) }
		s.step(at(0, 30*time.Minute+30*time.Second))
		s.add(t, "h", "p")
		s.step(at(5, 10*time.Second))
		first := s.schedule(t, "h").LastRun
		s.step(at(0, 45*time.Minute))
		for h := 1; h <= 4; h++ {
			s.step(at(h, 10*time.Second))
			// some looks within the hour (the scheduler's minute-long waits)
			s.step(at(h, 20*time.Minute))
		}
		s.step(at(5, 10*time.Second))
		if got := s.schedule(t, "h").LastRun; got != first {
			t.Errorf("05:00 after the clock came back: run %s, want %s", got, first)
		}
		s.step(at(7, 10*time.Second)) // ahead again
		s.step(at(5, 30*time.Minute)) // back again, behind 07:00
		s.step(at(6, 10*time.Second))
		s.step(at(7, 10*time.Second))
		db := s.db.SQL()
		if n := count(t, db, `SELECT COUNT(*) FROM (SELECT slot FROM runs WHERE schedule = 'h' GROUP BY slot HAVING COUNT(*) > 1)`); n != 0 {
			t.Errorf("%d slots with more than one run", n)
		}
		if n := count(t, db, `SELECT COUNT(*) FROM runs WHERE schedule = 'h'`); n != 7 {
			t.Errorf("%d runs, want 7 (01:00 to 07:00, each once)", n)
		}
		if back := entries(t, db, "orch.schedule.clock_back", "schedule/h"); len(back) != 2 {
			t.Errorf("%d clock_back entries, want 2 (the clock went back twice)", len(back))
		}
	})
}
