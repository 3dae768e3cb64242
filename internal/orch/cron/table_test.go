package cron_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/cron"
	"github.com/agora-dev/agora/internal/store"
)

func newTable(t *testing.T) (*cron.Table, *store.DB) {
	t.Helper()
	db, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "orch.db"), orch.Migrations())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return cron.NewTable(db, audit.New(nil)), db
}

// A schedule's row and its entries change together; a mark of a schedule that was removed
// and added again since it was read changes nothing; due schedules come by next slot.
func TestTable(t *testing.T) {
	ctx := context.Background()
	tb, db := newTable(t)
	hourly := mustParse(t, "0 * * * *", "UTC")
	add := func(name string, now time.Time) *cron.Schedule {
		t.Helper()
		s := &cron.Schedule{Name: name, Spec: hourly, Plan: []byte(`{"x":1}`), Digest: "sha256:x", Actor: "alice", PlanName: "p", Queue: "default", Tasks: 1}
		if err := tb.Add(ctx, s, now); err != nil {
			t.Fatal(err)
		}
		return s
	}
	a := add("a", utc("2026-11-24T00:30:00Z"))
	add("b", utc("2026-11-24T01:30:00Z"))
	if err := tb.Add(ctx, &cron.Schedule{Name: "a", Spec: hourly}, time.Now()); !errors.Is(err, cron.ErrExists) {
		t.Errorf("adding a again: %v, want ErrExists", err)
	}
	if err := tb.Add(ctx, &cron.Schedule{Name: "A b", Spec: hourly}, time.Now()); err == nil {
		t.Error("a schedule named \"A b\" was added")
	}
	if at, ok, err := tb.Earliest(ctx); err != nil || !ok || !at.Equal(utc("2026-11-24T01:00:00Z")) {
		t.Errorf("Earliest = %s %v %v", at, ok, err)
	}
	due, err := tb.DueBy(ctx, utc("2026-11-24T01:59:00Z"), 10)
	if err != nil || len(due) != 1 || due[0].Name != "a" || due[0].Plan != nil {
		t.Fatalf("DueBy = %+v, %v; want a alone, without its plan", due, err)
	}
	if p, err := tb.Plan(ctx, due[0]); err != nil || string(p) != `{"x":1}` {
		t.Errorf("Plan = %s, %v", p, err)
	}
	// a is removed and added again after it was read: the stale mark changes nothing.
	if err := tb.Remove(ctx, "a", "alice"); err != nil {
		t.Fatal(err)
	}
	add("a", utc("2026-11-24T01:10:00Z"))
	if ok, err := tb.Mark(ctx, a, cron.Firing{Slot: utc("2026-11-24T01:00:00Z"), RunID: "a@2026-11-24T01:00:00Z", Created: true}); ok || err != nil {
		t.Errorf("a stale mark: %v, %v", ok, err)
	}
	fresh, err := tb.Get(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := tb.Mark(ctx, fresh, cron.Firing{Slot: utc("2026-11-24T02:00:00Z"), Missed: 1, RunID: "a@2026-11-24T02:00:00Z", Created: true}); !ok || err != nil {
		t.Fatalf("Mark: %v, %v", ok, err)
	}
	got, _ := tb.Get(ctx, "a")
	if got.LastRun != "a@2026-11-24T02:00:00Z" || !got.LastSlot.Equal(utc("2026-11-24T02:00:00Z")) || !got.NextDue.Equal(utc("2026-11-24T03:00:00Z")) {
		t.Errorf("after the mark: %+v", got)
	}
	var kinds []string
	rows, err := db.SQL().Query(`SELECT kind FROM audit_entries WHERE subject = 'schedule/a' ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k string
		rows.Scan(&k)
		kinds = append(kinds, k)
	}
	rows.Close()
	want := []string{"orch.schedule.added", "orch.schedule.removed", "orch.schedule.added", "orch.schedule.missed", "orch.schedule.fired"}
	if len(kinds) != len(want) {
		t.Fatalf("entries %v, want %v", kinds, want)
	}
	for i := range want {
		if kinds[i] != want[i] {
			t.Errorf("entry %d is %s, want %s", i, kinds[i], want[i])
		}
	}
	if err := tb.Remove(ctx, "nope", "alice"); !errors.Is(err, cron.ErrNotFound) {
		t.Errorf("removing an unknown schedule: %v", err)
	}
}
