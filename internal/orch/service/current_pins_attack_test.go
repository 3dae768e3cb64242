package service_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/cron"
	"github.com/agora-dev/agora/internal/orch/plan"
	"github.com/agora-dev/agora/internal/orch/service"
	"github.com/agora-dev/agora/internal/store"
)

// TestAttack_PinsInEveryPlanPlace: a plan submitted over the service's HTTP API (as an MCP
// client's, a file's and a schedule's plan all are) hides a superseded or retired version in
// the places the first check's cases leave out: the defaults' env, a fan-out template's env
// bundles, reviewers and fixer, and a name pinned current in one task and superseded in
// another (so a lookup cached by name would pass it). Each is refused, naming it, and no run
// is made.
func TestAttack_PinsInEveryPlanPlace(t *testing.T) {
	c := startPinService(t)
	ctx := t.Context()

	fan := func(template string) string {
		return "tasks:\n  - {id: split, subagent: worker}\n  - id: port\n    fan_out: {from: split, select: \"output:x.json\", template: " + template + "}\n"
	}
	for _, tt := range []struct{ name, body, want string }{
		{"the defaults' env", "defaults: {env: [ci" + oldV + "]}\ntasks:\n  - {id: t, subagent: worker}\n", `env bundle "ci": version`},
		{"the defaults' retired env", "defaults: {env: [gone" + curV + "]}\ntasks:\n  - {id: t, subagent: worker}\n", `env bundle "gone" not found`},
		{"a fan-out template's env", fan("{subagent: porter, env: [ci" + oldV + "]}"), `env bundle "ci": version`},
		{"a fan-out template's reviewer", fan("{subagent: porter, review: {subagents: [judge" + oldV + "], approve: 1}}"), `subagent "judge": version`},
		{"a fan-out template's fixer", fan("{subagent: porter, review: {subagents: [judge], approve: 1}, on_fail: {fix: {subagent: fixer" + oldV + "}}}"), `subagent "fixer": version`},
		{"a name current in one task, superseded in the next", "tasks:\n  - {id: a, subagent: worker" + curV + "}\n  - {id: b, subagent: worker" + oldV + "}\n", `subagent "worker": version`},
		{"a reviewer current as a task's subagent, superseded as a reviewer", "tasks:\n  - {id: a, subagent: judge" + curV + "}\n  - {id: b, subagent: worker, review: {subagents: [judge" + oldV + "], approve: 1}}\n", `subagent "judge": version`},
		{"a fixer pinned as a task's subagent was", "tasks:\n  - {id: a, subagent: worker, review: {subagents: [judge], approve: 1}, on_fail: {fix: {subagent: gone" + curV + "}}}\n", `subagent "gone" not found`},
	} {
		src := "version: 1\nname: pins\n" + tt.body
		for _, file := range []string{"p.yaml", ""} { // a file's plan and an MCP client's
			_, err := c.Submit(ctx, api.SubmitRequest{File: file, Source: []byte(src), Actor: "mcp:x"})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%s (file %q): submit = %v, want it refused with %q", tt.name, file, err, tt.want)
			}
		}
	}
	if runs, err := c.Runs(ctx, 0); err != nil || len(runs) != 0 {
		t.Fatalf("refused plans left runs: %v, %v", runs, err)
	}
}

// changingCatalog is pinCatalog whose current versions people change while the test runs:
// once changed is set, curV is superseded too.
type changingCatalog struct {
	pinCatalog
	changed *atomic.Bool
}

func (c changingCatalog) Current(ctx context.Context, kind catalog.Kind, ref string) error {
	if c.changed.Load() && strings.HasSuffix(ref, curV) {
		name, _, _ := strings.Cut(ref, "@")
		return fmt.Errorf("%s %q: version %s is not its current one", kind, name, strings.TrimPrefix(curV, "@"))
	}
	return c.pinCatalog.Current(ctx, kind, ref)
}

// TestAttack_PinsScheduleSlotAfterPeopleChange: a schedule added while its plan's pins were
// current keeps firing on its own; once people supersede a version it pins, its next slot is
// refused, naming the version, and starts no run (the schedule fires new work, which holds
// to the catalog as people registered it now).
func TestAttack_PinsScheduleSlotAfterPeopleChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		db, err := store.Open(ctx, filepath.Join(t.TempDir(), "orch.db"), orch.Migrations())
		if err != nil {
			t.Fatal(err)
		}
		var changed atomic.Bool
		eng, err := orch.Open(ctx, db, audit.New(nil), instantExec{}, orch.Options{Refs: changingCatalog{changed: &changed}, Queues: map[string]int{"default": 4}})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		sched := &service.Scheduler{Server: &service.Server{Engine: eng}, Table: cron.NewTable(db, audit.New(nil)), Now: time.Now,
			Uptime: func() time.Duration { return time.Since(start) }}
		done := make(chan struct{}, 2)
		go func() { eng.Run(ctx); done <- struct{}{} }()
		go func() { sched.Run(ctx); done <- struct{}{} }()
		defer func() { cancel(); <-done; <-done; db.Close() }()

		hour := time.Now().UTC().Truncate(time.Hour)
		sleepUntil(hour.Add(30 * time.Minute))
		p, err := plan.Parse("p.yaml", []byte("version: 1\nname: pinned\ntasks: [{id: a, subagent: worker"+curV+", env: [ci"+curV+"]}]\n"))
		if err != nil {
			t.Fatal(err)
		}
		spec, err := cron.Parse("@hourly", "UTC")
		if err != nil {
			t.Fatal(err)
		}
		sch := &cron.Schedule{Name: "pinned", Spec: spec, Plan: p.Canonical(), Digest: p.Digest(), Actor: "tester", PlanName: p.Name, Tasks: 1}
		if err := sched.Table.Add(ctx, sch, time.Now()); err != nil {
			t.Fatal(err)
		}
		sched.Wake()
		sleepUntil(hour.Add(time.Hour))
		got, err := sched.Table.Get(ctx, "pinned")
		if err != nil || got.LastRun == "" {
			t.Fatalf("the first slot, its pins current: %+v, %v; want a run", got, err)
		}

		changed.Store(true) // people change worker and ci
		sleepUntil(hour.Add(2 * time.Hour))
		got, err = sched.Table.Get(ctx, "pinned")
		if err != nil || got.LastRun != "" || !strings.Contains(got.LastError, "is not its current one") {
			t.Errorf("the slot after people changed what it pins: run %q, error %q, %v; want it refused naming the version", got.LastRun, got.LastError, err)
		}
		if runs, err := eng.Runs(ctx, 0); err != nil || len(runs) != 1 {
			t.Errorf("runs: %d, %v; want only the first slot's", len(runs), err)
		}
	})
}
