package mcpserver_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/client"
)

// TestSchedulesAndQueuesOverMCP drives the real service through the real MCP server: a
// schedule a person added on the host is listed and shown to a read-ceiling client (which has
// no tool to add or remove one); a plan naming a queue agora.yaml does not declare is refused
// at submit, naming the declared queues; a scheduled run's id (NAME@SLOT) is a run id the
// status tool accepts.
func TestSchedulesAndQueuesOverMCP(t *testing.T) {
	home := newHome(t)
	if err := os.WriteFile(filepath.Join(home, "agora.yaml"), []byte("queues:\n  nightly: {concurrency: 1}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	serve := exec.Command(agoraBin, "orch", "serve")
	serve.Env = baseEnv(home)
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { serve.Process.Signal(syscall.SIGTERM); serve.Wait() })
	c := client.New(home + "/orch/orch.sock")
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := c.Health(context.Background()); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("serve did not answer")
		}
	}
	planFile := filepath.Join(t.TempDir(), "nightly.yaml")
	if err := os.WriteFile(planFile, []byte("version: 1\nname: nightly-plan\nqueue: nightly\ntasks: [{id: a, subagent: writer, env: [demo]}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	agora(t, home, nil, "orch", "schedule", "add", "nightly", "--cron", "0 2 * * *", "--tz", "Europe/Berlin", planFile)

	reader := stdioSession(t, home, "--ceiling", "read")
	var list struct {
		Schedules []api.Schedule `json:"schedules"`
	}
	decode(t, call(t, reader, "agora_orchestrator_schedules_list", nil), &list)
	if len(list.Schedules) != 1 {
		t.Fatalf("schedules = %+v", list.Schedules)
	}
	s := list.Schedules[0]
	if s.Name != "nightly" || s.Spec != "0 2 * * *" || s.Zone != "Europe/Berlin" || s.PlanName != "nightly-plan" || s.Queue != "nightly" ||
		s.NextDue == nil || (s.NextDue.UTC().Hour() != 0 && s.NextDue.UTC().Hour() != 1) { // 02:00 in Berlin
		t.Errorf("listed schedule = %+v", s)
	}
	var shown struct {
		Schedule api.Schedule `json:"schedule"`
	}
	decode(t, call(t, reader, "agora_orchestrator_schedule_show", map[string]any{"name": "nightly"}), &shown)
	if shown.Schedule.Name != "nightly" || shown.Schedule.PlanDigest != s.PlanDigest {
		t.Errorf("shown schedule = %+v", shown.Schedule)
	}
	if got := text(call(t, reader, "agora_orchestrator_schedule_show", map[string]any{"name": "weekly"})); !strings.Contains(got, "not found") {
		t.Errorf("an unknown schedule: %q", got)
	}
	if got := text(call(t, reader, "agora_orchestrator_schedule_show", map[string]any{"name": "../x"})); !strings.Contains(got, "not a schedule name") {
		t.Errorf("a malformed name: %q", got)
	}
	if got := text(call(t, reader, "agora_orchestrator_status", map[string]any{"run_id": "nightly@2026-11-24T01:00:00Z"})); !strings.Contains(got, "not found") {
		t.Errorf("a slot's run id is a run id: %q", got)
	}

	planner := stdioSession(t, home)
	plan := map[string]any{"version": 1, "name": "queued", "queue": "nighty", "tasks": []any{
		map[string]any{"id": "a", "subagent": "writer", "env": []string{"demo"}},
	}}
	got := text(call(t, planner, "agora_orchestrator_submit", map[string]any{"plan": plan}))
	if !strings.Contains(got, `queue "nighty" is not declared in agora.yaml; known: default, nightly`) {
		t.Errorf("a plan on an undeclared queue: %q", got)
	}
	if runs, err := c.Runs(t.Context(), 10); err != nil || len(runs) != 0 {
		t.Errorf("runs after a refused submit: %v, %v", runs, err)
	}
}
