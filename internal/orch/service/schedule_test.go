package service_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/store"
)

// The test-only settings of serve's scheduler (internal/cli/orch/schedule_testonly.go).
const (
	envClock = "AGORA_TESTONLY_SCHEDULE_CLOCK"
	envCrash = "AGORA_TESTONLY_SCHEDULE_CRASH"
)

// clockEnv is an env whose scheduler reads its time from a file the test writes.
type clockEnv struct {
	*env
	clock string
}

func newClockEnv(t *testing.T) *clockEnv {
	t.Helper()
	requireBwrap(t)
	e := newEnv(t)
	c := &clockEnv{env: e, clock: filepath.Join(t.TempDir(), "clock")}
	e.vars = append(e.vars, envClock+"="+c.clock)
	return c
}

// setClock moves the scheduler's clock.
func (c *clockEnv) setClock(at string) {
	c.t.Helper()
	// Written aside and renamed into place, so serve never reads a half-written clock.
	tmp := c.clock + ".tmp"
	must(c.t, os.WriteFile(tmp, []byte(at+"\n"), 0o600))
	must(c.t, os.Rename(tmp, c.clock))
}

// serveWith starts serve with extra environment; it returns at once when wait is false.
func (c *clockEnv) serveWith(wait bool, extra ...string) *exec.Cmd {
	c.t.Helper()
	saved := c.vars
	c.vars = append(append([]string{}, c.vars...), extra...)
	defer func() { c.vars = saved }()
	if wait {
		return c.serve()
	}
	cmd := exec.Command(agoraBin, "orch", "serve")
	cmd.Env = c.vars
	log, err := os.OpenFile(filepath.Join(c.home, "..", "serve.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	must(c.t, err)
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	must(c.t, cmd.Start())
	return cmd
}

// stdout runs the binary and returns its stdout alone.
func (e *env) stdout(args ...string) string {
	e.t.Helper()
	cmd := exec.Command(agoraBin, args...)
	cmd.Env = e.vars
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		e.t.Fatalf("agora %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

func (e *env) schedule(name string) api.Schedule {
	e.t.Helper()
	var s api.Schedule
	must(e.t, json.Unmarshal([]byte(e.stdout("orch", "schedule", "show", name, "-o", "json")), &s))
	return s
}

// waitSlot waits until schedule name's last slot is slot.
func (e *env) waitSlot(name, slot string) api.Schedule {
	e.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		s := e.schedule(name)
		if s.LastSlot != nil && s.LastSlot.UTC().Format(time.RFC3339) == slot {
			return s
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(e.home, "..", "serve.log"))
			e.t.Fatalf("schedule %s: last slot %v after 60s, want %s\n%s", name, s.LastSlot, slot, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// orchDB opens orch.db beside serve (WAL lets it read while serve writes).
func (e *env) orchDB() *sql.DB {
	e.t.Helper()
	db, err := store.OpenReadOnly(context.Background(), filepath.Join(e.home, "orch", "orch.db"))
	must(e.t, err)
	e.t.Cleanup(func() { db.Close() })
	return db.SQL()
}

func count(t *testing.T, db *sql.DB, q string, args ...any) int {
	t.Helper()
	var n int
	must(t, db.QueryRow(q, args...).Scan(&n))
	return n
}

// entries returns the details of every audit entry of kind on subject, in order.
func entries(t *testing.T, db *sql.DB, kind, subject string) []map[string]any {
	t.Helper()
	rows, err := db.Query(`SELECT entry FROM audit_entries WHERE kind = ? AND subject = ? ORDER BY seq`, kind, subject)
	must(t, err)
	defer rows.Close()
	var out []map[string]any
	for rows.Next() {
		var b []byte
		must(t, rows.Scan(&b))
		var e struct {
			Details map[string]any `json:"details"`
		}
		must(t, json.Unmarshal(b, &e))
		out = append(out, e.Details)
	}
	return out
}

func writePlan(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name+".yaml")
	must(t, os.WriteFile(p, []byte(body), 0o600))
	return p
}

// TestSchedule_Kill9 fires an hourly schedule's slots while serve kills itself with SIGKILL
// before it submits the slot's run, between submitting and marking the slot fired, and after
// marking it; each time a new serve starts. Every slot ends with exactly one run, its id
// NAME@SLOT, one orch.run.submitted entry and one orch.schedule.fired entry: not zero runs,
// not two.
func TestSchedule_Kill9(t *testing.T) {
	c := newClockEnv(t)
	c.setClock("2026-11-24T00:30:00Z")
	serve := c.serve()
	t.Cleanup(func() { serve.Process.Kill(); serve.Wait() })
	plan := writePlan(t, "hourly", "version: 1\nname: hourly\ntasks: [{id: a, subagent: worker, input: {n: 1}}]\n")
	c.run("orch", "schedule", "add", "hourly", "--cron", "0 * * * *", "--tz", "Europe/Berlin", plan)
	if s := c.schedule("hourly"); s.NextDue == nil || s.NextDue.UTC().Format(time.RFC3339) != "2026-11-24T01:00:00Z" {
		t.Fatalf("next slot %v, want 2026-11-24T01:00:00Z", s.NextDue)
	}
	db := c.orchDB()
	for i, point := range []string{"before-submit", "after-submit", "after-mark"} {
		slot := time.Date(2026, 11, 24, 1+i, 0, 0, 0, time.UTC).Format(time.RFC3339)
		t.Run(point, func(t *testing.T) {
			serve.Process.Signal(syscall.SIGTERM)
			serve.Wait()
			crashing := c.serveWith(false, envCrash+"="+point)
			c.setClock(strings.Replace(slot, ":00:00Z", ":00:30Z", 1))
			done := make(chan error, 1)
			go func() { done <- crashing.Wait() }()
			select {
			case err := <-done:
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
					t.Fatalf("serve ended %v, want killed by SIGKILL %s", err, point)
				}
			case <-time.After(60 * time.Second):
				crashing.Process.Kill()
				t.Fatalf("serve did not reach %s within 60s", point)
			}
			serve = c.serve()
			s := c.waitSlot("hourly", slot)
			id := "hourly@" + slot
			if s.LastRun != id || s.LastError != "" {
				t.Errorf("slot %s: last run %q (error %q), want %s", slot, s.LastRun, s.LastError, id)
			}
			if n := count(t, db, `SELECT COUNT(*) FROM runs WHERE schedule = 'hourly' AND slot LIKE ?`, slot[:13]+"%"); n != 1 {
				t.Errorf("slot %s has %d runs, want 1", slot, n)
			}
			if n := len(entries(t, db, "orch.run.submitted", "run/"+id)); n != 1 {
				t.Errorf("run %s was submitted %d times, want once", id, n)
			}
			var fired []map[string]any
			for _, f := range entries(t, db, "orch.schedule.fired", "schedule/hourly") {
				if f["slot"] == slot {
					fired = append(fired, f)
				}
			}
			if len(fired) != 1 || fired[0]["run_id"] != id {
				t.Errorf("slot %s fired %v, want once with run %s", slot, fired, id)
			}
			// Between submit and mark the run existed unmarked: the next serve marked it.
			if recovered := len(fired) == 1 && fired[0]["recovered"] == true; recovered != (point == "after-submit") {
				t.Errorf("slot %s after a crash %s: recovered = %v", slot, point, recovered)
			}
			r := waitRun(t, c.client(), id, 2*time.Minute)
			if r.State != lifecycle.RunSucceeded || r.Schedule != "hourly" || r.Slot == nil || r.Missed != 0 {
				t.Errorf("run %s: %s, schedule %q slot %v missed %d", id, r.State, r.Schedule, r.Slot, r.Missed)
			}
		})
	}
	if n := count(t, db, `SELECT COUNT(*) FROM runs WHERE schedule = 'hourly'`); n != 3 {
		t.Errorf("%d runs for three slots, want 3", n)
	}
}

// TestSchedule_MissedSlotsCatchUp stops serve across three hourly slots: the next serve runs
// one catch-up run, for the latest of them, whose status says two were missed (audited as
// orch.schedule.missed); the slot after that fires on its own with none missed.
func TestSchedule_MissedSlotsCatchUp(t *testing.T) {
	c := newClockEnv(t)
	c.setClock("2026-11-24T00:30:00Z")
	serve := c.serve()
	plan := writePlan(t, "hourly", "version: 1\nname: hourly\ntasks: [{id: a, subagent: worker}]\n")
	c.run("orch", "schedule", "add", "hourly", "--cron", "@hourly", plan)
	serve.Process.Signal(syscall.SIGTERM)
	serve.Wait()
	c.setClock("2026-11-24T03:10:00Z") // 01:00, 02:00 and 03:00 came while serve was down
	serve = c.serve()
	t.Cleanup(func() { serve.Process.Signal(syscall.SIGTERM); serve.Wait() })
	s := c.waitSlot("hourly", "2026-11-24T03:00:00Z")
	const id = "hourly@2026-11-24T03:00:00Z"
	if s.LastRun != id {
		t.Fatalf("last run %q, want %s", s.LastRun, id)
	}
	db := c.orchDB()
	if n := count(t, db, `SELECT COUNT(*) FROM runs WHERE schedule = 'hourly'`); n != 1 {
		t.Errorf("%d runs after three missed slots, want one catch-up run", n)
	}
	out := c.run("orch", "status", id)
	if !strings.Contains(out, "schedule: hourly, slot 2026-11-24T03:00:00Z, missed: 2") {
		t.Errorf("status does not say how many slots were missed:\n%s", out)
	}
	var r api.Run
	must(t, json.Unmarshal([]byte(c.stdout("orch", "status", id, "-o", "json")), &r))
	if r.Missed != 2 || r.Schedule != "hourly" {
		t.Errorf("status -o json: missed %d schedule %q, want 2 hourly", r.Missed, r.Schedule)
	}
	missed := entries(t, db, "orch.schedule.missed", "schedule/hourly")
	if len(missed) != 1 || missed[0]["missed"] != float64(2) || missed[0]["slot"] != "2026-11-24T03:00:00Z" {
		t.Errorf("orch.schedule.missed entries %v, want one of 2 for 03:00", missed)
	}
	waitRun(t, c.client(), id, 2*time.Minute)

	c.setClock("2026-11-24T04:00:05Z")
	s = c.waitSlot("hourly", "2026-11-24T04:00:00Z")
	r = waitRun(t, c.client(), s.LastRun, 2*time.Minute)
	if r.ID != "hourly@2026-11-24T04:00:00Z" || r.Missed != 0 || r.State != lifecycle.RunSucceeded {
		t.Errorf("the next slot's run: %s missed %d %s", r.ID, r.Missed, r.State)
	}
}

// TestSchedule_RetiredSubagent retires the subagent a schedule's plan names: the next slot is
// refused (no run; orch.schedule.refused names why) and the schedule goes on: once the
// subagent is registered again, the slot after fires.
func TestSchedule_RetiredSubagent(t *testing.T) {
	c := newClockEnv(t)
	c.setClock("2026-11-24T00:30:00Z")
	serve := c.serve()
	t.Cleanup(func() { serve.Process.Signal(syscall.SIGTERM); serve.Wait() })
	plan := writePlan(t, "p", "version: 1\nname: hourly\ntasks: [{id: a, subagent: worker}]\n")
	c.run("orch", "schedule", "add", "hourly", "--cron", "0 * * * *", plan)
	manifest := filepath.Join(c.home, "..", "catalog", "agora-manifest.yaml")
	full, err := os.ReadFile(manifest)
	must(t, err)
	must(t, os.WriteFile(manifest, []byte(strings.Replace(string(full), "  - {name: worker, from: worker.yaml}\n", "", 1)), 0o644))
	c.run("apply", "-f", manifest, "--prune")
	c.setClock("2026-11-24T01:00:10Z")
	s := c.waitSlot("hourly", "2026-11-24T01:00:00Z")
	if s.LastRun != "" || !strings.Contains(s.LastError, `subagent "worker"`) {
		t.Errorf("a slot of a retired subagent: run %q, error %q", s.LastRun, s.LastError)
	}
	db := c.orchDB()
	refused := entries(t, db, "orch.schedule.refused", "schedule/hourly")
	if len(refused) != 1 || !strings.Contains(refused[0]["error"].(string), "worker") {
		t.Errorf("orch.schedule.refused entries %v", refused)
	}
	if n := count(t, db, `SELECT COUNT(*) FROM runs WHERE schedule = 'hourly'`); n != 0 {
		t.Errorf("%d runs of a refused slot", n)
	}
	must(t, os.WriteFile(manifest, full, 0o644))
	c.run("apply", "-f", manifest)
	c.setClock("2026-11-24T02:00:10Z")
	s = c.waitSlot("hourly", "2026-11-24T02:00:00Z")
	if s.LastRun != "hourly@2026-11-24T02:00:00Z" || s.LastError != "" {
		t.Errorf("the slot after: run %q error %q", s.LastRun, s.LastError)
	}
	waitRun(t, c.client(), s.LastRun, 2*time.Minute)
}

// TestSchedule_AddRefuses: add is refused for a bad spec, zone, name or plan (naming the
// problem) and for a name in use; remove of an unknown name says so.
func TestSchedule_AddRefuses(t *testing.T) {
	e := servedEnv(t)
	plan := writePlan(t, "p", "version: 1\nname: p\ntasks: [{id: a, subagent: worker}]\n")
	bad := writePlan(t, "bad", "version: 1\nname: p\nqueue: nighty\ntasks: [{id: a, subagent: nobody}]\n")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"x", "--cron", "0 0 30 2 *", plan}, "never fires"},
		{[]string{"x", "--cron", "@every 1h", plan}, "unknown descriptor"},
		{[]string{"x", "--cron", "0 2 * * *", "--tz", "Mars/Olympus", plan}, "not in the IANA time zone database"},
		{[]string{"X!", "--cron", "0 2 * * *", plan}, "invalid schedule name"},
		{[]string{"x", "--cron", "0 2 * * *", bad}, `queue "nighty" is not declared in agora.yaml; known: default`},
		{[]string{"x", "--cron", "0 2 * * *", bad}, `subagent "nobody" not found`},
	} {
		cmd := exec.Command(agoraBin, append([]string{"orch", "schedule", "add"}, tt.args...)...)
		cmd.Env = e.vars
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), tt.want) {
			t.Errorf("schedule add %v: %v\n%s\nwant %q", tt.args, err, out, tt.want)
		}
	}
	e.run("orch", "schedule", "add", "x", "--cron", "0 2 * * *", plan)
	cmd := exec.Command(agoraBin, "orch", "schedule", "add", "x", "--cron", "0 3 * * *", plan)
	cmd.Env = e.vars
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), `schedule exists: "x"`) {
		t.Errorf("a second add of x: %v\n%s", err, out)
	}
	e.run("orch", "schedule", "remove", "x")
	cmd = exec.Command(agoraBin, "orch", "schedule", "remove", "x")
	cmd.Env = e.vars
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), `schedule "x" not found`) {
		t.Errorf("removing x twice: %v\n%s", err, out)
	}
	db, err := store.Open(context.Background(), filepath.Join(e.home, "orch", "orch.db"), orch.Migrations())
	must(t, err)
	defer db.Close()
	for kind, want := range map[string]int{"orch.schedule.added": 1, "orch.schedule.removed": 1} {
		if n := count(t, db.SQL(), `SELECT COUNT(*) FROM audit_entries WHERE kind = ? AND subject = 'schedule/x'`, kind); n != want {
			t.Errorf("%d %s entries, want %d", n, kind, want)
		}
	}
}

// TestSchedule_ClockAYearAheadAndBack: serve's clock a year ahead for a moment fires one
// slot a year away (one run, none missed: serve measured seconds passing, not the year it
// jumped over, and says so in its log); back at the right time the
// schedule fires its next slot from now, not from the slot a year ahead, and says why once
// (orch.schedule.clock_back, a warning in serve's log). A year later the slot fired while the
// clock was ahead is submitted again and answered with the same run: a slot never runs twice.
func TestSchedule_ClockAYearAheadAndBack(t *testing.T) {
	c := newClockEnv(t)
	c.setClock("2026-11-24T00:30:00Z")
	serve := c.serve()
	t.Cleanup(func() { serve.Process.Signal(syscall.SIGTERM); serve.Wait() })
	plan := writePlan(t, "hourly", "version: 1\nname: hourly\ntasks: [{id: a, subagent: worker}]\n")
	c.run("orch", "schedule", "add", "hourly", "--cron", "@hourly", plan)
	c.setClock("2027-11-24T00:30:05Z")
	ahead := c.waitSlot("hourly", "2027-11-24T00:00:00Z")
	if r := waitRun(t, c.client(), ahead.LastRun, 2*time.Minute); r.Missed != 0 {
		t.Errorf("the slot a year ahead: %d missed, want none (the year did not pass)", r.Missed)
	}
	if b, _ := os.ReadFile(filepath.Join(c.home, "..", "serve.log")); !strings.Contains(string(b), "the slots it jumped over are not counted as missed") {
		t.Errorf("serve's log does not say the clock jumped ahead:\n%s", b)
	}
	// The audit says it too: the fired entry counts the slots the clock jumped over.
	jumped := false
	for _, f := range entries(t, c.orchDB(), "orch.schedule.fired", "schedule/hourly") {
		if f["slot"] == "2027-11-24T00:00:00Z" {
			j, _ := f["jumped_over"].(float64)
			jumped = j > 8000 && f["missed"] == float64(0)
		}
	}
	if !jumped {
		t.Errorf("the slot a year ahead's orch.schedule.fired entry does not count the slots jumped over: %v",
			entries(t, c.orchDB(), "orch.schedule.fired", "schedule/hourly"))
	}

	c.setClock("2026-11-24T00:45:00Z") // back: the next slot is 01:00 again, not 2027's next
	c.waitClockBack("hourly")
	c.setClock("2026-11-24T01:00:05Z")
	s := c.waitSlot("hourly", "2026-11-24T01:00:00Z")
	r := waitRun(t, c.client(), s.LastRun, 2*time.Minute)
	if r.ID != "hourly@2026-11-24T01:00:00Z" || r.Missed != 0 || r.State != lifecycle.RunSucceeded {
		t.Errorf("the first slot after the clock came back: %s missed %d %s", r.ID, r.Missed, r.State)
	}
	db := c.orchDB()
	back := entries(t, db, "orch.schedule.clock_back", "schedule/hourly")
	if len(back) != 1 || back[0]["last_slot"] != "2027-11-24T00:00:00Z" {
		t.Errorf("orch.schedule.clock_back entries %v, want one naming the last slot 2027-11-24T00:00:00Z", back)
	}
	c.setClock("2026-11-24T02:00:05Z")
	if s := c.waitSlot("hourly", "2026-11-24T02:00:00Z"); s.LastRun != "hourly@2026-11-24T02:00:00Z" {
		t.Errorf("the next slot: last run %s", s.LastRun)
	}
	waitRun(t, c.client(), "hourly@2026-11-24T02:00:00Z", 2*time.Minute)
	if n := count(t, db, `SELECT COUNT(*) FROM runs WHERE schedule = 'hourly'`); n != 3 {
		t.Errorf("%d runs, want 3 (a year ahead, 01:00 and 02:00)", n)
	}
	if back := entries(t, db, "orch.schedule.clock_back", "schedule/hourly"); len(back) != 1 {
		t.Errorf("%d orch.schedule.clock_back entries after the next slot, want still 1", len(back))
	}
	// A year on, the slot fired while the clock was ahead comes again: the same run.
	c.setClock("2027-11-24T00:00:05Z")
	if s := c.waitSlot("hourly", "2027-11-24T00:00:00Z"); s.LastRun != ahead.LastRun {
		t.Errorf("the slot a year on: run %s, want the same run %s", s.LastRun, ahead.LastRun)
	}
	if n := count(t, db, `SELECT COUNT(*) FROM runs WHERE schedule = 'hourly'`); n != 3 {
		t.Errorf("%d runs after the slot a year on, want still 3", n)
	}
	if b, _ := os.ReadFile(filepath.Join(c.home, "..", "serve.log")); !strings.Contains(string(b), "the clock is earlier than its last slot") {
		t.Errorf("serve's log does not say the clock went back:\n%s", b)
	}
}

// waitClockBack waits for serve to record that the clock went back behind schedule name's
// last slot.
func (c *clockEnv) waitClockBack(name string) {
	c.t.Helper()
	db := c.orchDB()
	agoratest.WaitFor(c.t, 60*time.Second, "orch.schedule.clock_back of "+name, func() bool {
		return len(entries(c.t, db, "orch.schedule.clock_back", "schedule/"+name)) > 0
	})
}
