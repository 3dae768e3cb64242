package service_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/cron"
	"github.com/agora-dev/agora/internal/orch/plan"
	"github.com/agora-dev/agora/internal/orch/service"
	"github.com/agora-dev/agora/internal/store"
)

// instantExec ends every attempt succeeded at once: the engine's cycle without a sandbox.
type instantExec struct{}

func (instantExec) Start(_ context.Context, a orch.Attempt, done func(orch.Outcome)) {
	go done(orch.Outcome{DispatchID: a.DispatchID, State: lifecycle.TaskSucceeded})
}
func (instantExec) Cancel(context.Context, string) {}

// scheduledEngine is an engine and a running scheduler over one orch.db that holds n idle
// schedules (yearly, next slot months away).
func scheduledEngine(b *testing.B, n int) (*orch.Engine, *service.Scheduler) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	db, err := store.Open(ctx, filepath.Join(b.TempDir(), "orch.db"), orch.Migrations(), store.FullSync())
	if err != nil {
		b.Fatal(err)
	}
	eng, err := orch.Open(ctx, db, audit.New(nil), instantExec{}, orch.Options{Queues: map[string]int{"default": 16}})
	if err != nil {
		b.Fatal(err)
	}
	table := cron.NewTable(db, audit.New(nil))
	p, err := plan.Parse("p.yaml", []byte("version: 1\nname: idle\ntasks: [{id: a, subagent: worker}]\n"))
	if err != nil {
		b.Fatal(err)
	}
	spec, err := cron.Parse("0 0 1 1 *", "Europe/Berlin")
	if err != nil {
		b.Fatal(err)
	}
	// The rows Table.Add writes, in one transaction (10,000 transactions of their own would
	// cost the setup minutes of fsync).
	now := time.Now().UTC()
	next := spec.Next(now).Format("2006-01-02T15:04:05.000000000Z07:00")
	if err := db.Tx(ctx, func(tx *sql.Tx) error {
		for i := range n {
			if _, err := tx.ExecContext(ctx, `INSERT INTO schedules(name, spec, zone, plan, digest, actor, created_at, next_due, plan_name, tasks)
				VALUES (?, ?, ?, ?, ?, 'bench', ?, ?, 'idle', 1)`, fmt.Sprintf("idle-%05d", i), spec.String(), spec.Zone(), p.Canonical(), p.Digest(),
				now.Format("2006-01-02T15:04:05.000000000Z07:00"), next); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	sched := &service.Scheduler{Server: &service.Server{Engine: eng}, Table: table, Now: time.Now}
	done := make(chan struct{}, 2)
	go func() { eng.Run(ctx); done <- struct{}{} }()
	go func() { sched.Run(ctx); done <- struct{}{} }()
	b.Cleanup(func() { cancel(); <-done; <-done; db.Close() })
	return eng, sched
}

// BenchmarkEngineCycle_IdleSchedules is one engine cycle (a one-task run submitted, fired,
// completed and sealed: three committed batches) beside a running scheduler whose table holds
// 0 or 10,000 idle schedules. The scheduler sleeps until the earliest next slot (an index
// read when it starts) and is woken only by add and remove, so the two should not differ.
func BenchmarkEngineCycle_IdleSchedules(b *testing.B) {
	for _, n := range []int{0, 10_000} {
		b.Run(fmt.Sprintf("schedules=%d", n), func(b *testing.B) {
			eng, _ := scheduledEngine(b, n)
			events, stop := eng.Subscribe("*")
			defer stop()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				p, err := plan.Parse("p.yaml", fmt.Appendf(nil, "version: 1\nname: cycle-%d\ntasks: [{id: a, subagent: worker}]\n", i))
				if err != nil {
					b.Fatal(err)
				}
				id, _, err := eng.Submit(context.Background(), p, orch.Checkout{}, "bench")
				if err != nil {
					b.Fatal(err)
				}
				for ev := range events {
					if ev.Run == id && ev.Kind == "orch.run.sealed" {
						break
					}
				}
			}
		})
	}
}

// BenchmarkScheduler_FireOneDue adds a schedule whose slot is already due to a table of 0 or
// 10,000 idle schedules and waits until its slot has fired (submitted and marked): what the
// scheduler reads per slot is index ranges, not the table.
func BenchmarkScheduler_FireOneDue(b *testing.B) {
	for _, n := range []int{0, 10_000} {
		b.Run(fmt.Sprintf("schedules=%d", n), func(b *testing.B) {
			eng, sched := scheduledEngine(b, n)
			spec, err := cron.Parse("* * * * *", "UTC")
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				p, err := plan.Parse("p.yaml", fmt.Appendf(nil, "version: 1\nname: due-%d\ntasks: [{id: a, subagent: worker}]\n", i))
				if err != nil {
					b.Fatal(err)
				}
				name := fmt.Sprintf("due-%d", i)
				// Added two minutes ago: its slot a minute ago is due now.
				s := &cron.Schedule{Name: name, Spec: spec, Plan: p.Canonical(), Digest: p.Digest(), Actor: "bench", PlanName: p.Name, Queue: "default", Tasks: 1}
				if err := sched.Table.Add(context.Background(), s, time.Now().Add(-2*time.Minute)); err != nil {
					b.Fatal(err)
				}
				sched.Wake()
				for {
					got, err := sched.Table.Get(context.Background(), name)
					if err != nil {
						b.Fatal(err)
					}
					if got.LastRun != "" {
						break
					}
					time.Sleep(200 * time.Microsecond)
				}
				if err := sched.Table.Remove(context.Background(), name, "bench"); err != nil {
					b.Fatal(err)
				}
			}
			_ = eng
		})
	}
}
