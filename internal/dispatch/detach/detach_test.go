package detach

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
)

func TestSupervisors_Start(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("AGORA_DETACH_TEST", "inherited")
	bin := fakeAgora(t, dir, `printf %s "$AGORA_DETACH_TEST" > '`+dir+`/env'
touch '`+dir+`/started-'"$3"
exec sleep 30`)
	recs := newFakeRecords(dir, accepted("D1"))
	s := &Supervisors{Bin: bin, Records: recs}

	r, err := s.Start(t.Context(), "D1")
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if r.ID != "D1" || r.State != lifecycle.DispatchStarted {
		t.Fatalf("Start = %s %s, want D1 started", r.ID, r.State)
	}
	pids := spawned(t, dir)
	if len(pids) != 1 {
		t.Fatalf("spawned %v, want one supervisor", pids)
	}
	pid := pids[0]
	if env, err := os.ReadFile(filepath.Join(dir, "env")); err != nil || string(env) != "inherited" {
		t.Errorf("the supervisor's environment has AGORA_DETACH_TEST=%q (%v), want this process's %q", env, err, "inherited")
	}
	if st, err := agoratest.ReadProcStat(pid); err != nil || st.Session != pid {
		t.Errorf("the supervisor runs in session %d (%v), want a session of its own (%d)", st.Session, err, pid)
	}
	for fd := 0; fd <= 2; fd++ {
		if target, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/" + strconv.Itoa(fd)); err != nil || target != os.DevNull {
			t.Errorf("the supervisor's fd %d is %q (%v), want %s", fd, target, err, os.DevNull)
		}
	}
	// kill -9 of the supervisor: Start's process still waits for it, so no zombie stays.
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitReaped(t, pid)
}

func TestSupervisors_Start_SupervisorExitsAtOnce(t *testing.T) {
	dir := t.TempDir()
	recs := newFakeRecords(dir, accepted("D1"))
	// The supervisor starts the worker and exits at once; Start reads the record as soon
	// as the supervisor exits (or at the next tick).
	bin := fakeAgora(t, dir, `touch '`+dir+`/started-'"$3"`)
	s := &Supervisors{Bin: bin, Records: recs}
	r, err := s.Start(t.Context(), "D1")
	if err != nil || r.State == lifecycle.DispatchAccepted {
		t.Fatalf("Start = %+v, %v; want the dispatch past accepted", r, err)
	}
}

func TestSupervisors_Start_CtxCancel(t *testing.T) {
	dir := t.TempDir()
	bin := fakeAgora(t, dir, "exec sleep 30")
	s := &Supervisors{Bin: bin, Records: newFakeRecords(dir, accepted("D1"))}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	_, err := s.Start(ctx, "D1")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Start = %v, want the context's error", err)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("Start returned %v after its context ended", d)
	}
	// The supervisor keeps running: stopping the caller never stops the work.
	pids := spawned(t, dir)
	if len(pids) != 1 || syscall.Kill(pids[0], 0) != nil {
		t.Errorf("supervisors %v: want one, still running after Start gave up", pids)
	}
}

func TestSupervisors_Start_NotStartedInTime(t *testing.T) {
	dir := t.TempDir()
	bin := fakeAgora(t, dir, "exec sleep 30")
	s := &Supervisors{Bin: bin, Records: newFakeRecords(dir, accepted("D1")), startWithin: 100 * time.Millisecond}
	_, err := s.Start(t.Context(), "D1")
	want := "dispatch D1 did not start within a minute; see 'agora dispatch describe D1'"
	if err == nil || err.Error() != want {
		t.Fatalf("Start = %v, want %q", err, want)
	}
}

func TestSupervisors_SpawnFails(t *testing.T) {
	dir := t.TempDir()
	recs := newFakeRecords(dir, accepted("D1"))
	s := &Supervisors{Bin: filepath.Join(dir, "missing"), Records: recs}
	if _, err := s.Start(t.Context(), "D1"); err == nil || !strings.HasPrefix(err.Error(), "start detached supervisor: ") {
		t.Errorf("Start = %v, want start detached supervisor: ...", err)
	}
	_, err := s.Watch(t.Context(), accepted("D1"))
	if err == nil || !strings.HasPrefix(err.Error(), "start supervisor of dispatch D1: start detached supervisor: ") {
		t.Errorf("Watch = %v, want start supervisor of dispatch D1: start detached supervisor: ...", err)
	}
}

func TestSupervisors_Watch_GivesUp(t *testing.T) {
	dir := t.TempDir()
	bin := fakeAgora(t, dir, "exit 1")
	recs := newFakeRecords(dir, accepted("D1"))
	s := &Supervisors{Bin: bin, Records: recs, Poll: 10 * time.Millisecond}
	r, err := s.Watch(t.Context(), accepted("D1"))
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	want := dispatch.Outcome{State: lifecycle.DispatchFailed, Reason: lifecycle.ReasonProviderFailed,
		Detail: "3 supervisors exited before starting the worker"}
	if r.State != want.State || r.Reason != want.Reason || r.Detail != want.Detail {
		t.Errorf("Watch = %s/%s %q, want %s/%s %q", r.State, r.Reason, r.Detail, want.State, want.Reason, want.Detail)
	}
	if got := recs.outcomes(); len(got) != 1 {
		t.Errorf("recorded outcomes %+v, want exactly one", got)
	}
	if pids := spawned(t, dir); len(pids) != MaxSpawns {
		t.Errorf("started %d supervisors, want %d", len(pids), MaxSpawns)
	}
}

func TestSupervisors_Watch_Kill9(t *testing.T) {
	dir := t.TempDir()
	// The first supervisor hangs before starting the worker; the next one starts it.
	bin := fakeAgora(t, dir, `n=$(wc -l < '`+dir+`/spawns')
[ $n -ge 2 ] && touch '`+dir+`/started-'"$3"
exec sleep 30`)
	recs := newFakeRecords(dir, accepted("D1"))
	recs.setSupervising(true)
	s := &Supervisors{Bin: bin, Records: recs, Reaper: &lostReaper{f: recs}, Poll: 10 * time.Millisecond}
	type result struct {
		r   *dispatch.Record
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := s.Watch(t.Context(), accepted("D1"))
		done <- result{r, err}
	}()
	agoratest.WaitFor(t, 10*time.Second, "the first supervisor", func() bool { return len(spawned(t, dir)) == 1 })
	first := spawned(t, dir)[0]
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitReaped(t, first)
	agoratest.WaitFor(t, 10*time.Second, "a second supervisor", func() bool { return len(spawned(t, dir)) == 2 })
	agoratest.WaitFor(t, 10*time.Second, "the worker to start", func() bool {
		r, _ := recs.Get(t.Context(), "D1")
		return r.State == lifecycle.DispatchStarted
	})
	// The second supervisor records the end, as a real one does.
	if _, err := recs.Finish(t.Context(), "D1", dispatch.Outcome{State: lifecycle.DispatchFinished}); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err != nil || res.r.State != lifecycle.DispatchFinished {
		t.Fatalf("Watch = %+v, %v; want finished", res.r, res.err)
	}
	if pids := spawned(t, dir); len(pids) != 2 {
		t.Errorf("started supervisors %v, want two", pids)
	}
}

func TestSupervisors_Watch_ReapsLost(t *testing.T) {
	dir := t.TempDir()
	recs := newFakeRecords(dir, &dispatch.Record{ID: "D1", State: lifecycle.DispatchStarted})
	reaper := &lostReaper{f: recs}
	s := &Supervisors{Bin: fakeAgora(t, dir, "exit 1"), Records: recs, Reaper: reaper, Poll: 10 * time.Millisecond}
	r, err := s.Watch(t.Context(), &dispatch.Record{ID: "D1", State: lifecycle.DispatchStarted})
	if err != nil || r.State != lifecycle.DispatchFailed || r.Reason != lifecycle.ReasonLost {
		t.Fatalf("Watch = %+v, %v; want failed/lost", r, err)
	}
	if reaper.count() == 0 {
		t.Error("the reaper never ran")
	}
	if pids := spawned(t, dir); len(pids) != 0 {
		t.Errorf("started supervisors %v for a started dispatch, want none", pids)
	}
}

func TestSupervisors_Watch_CtxCancel(t *testing.T) {
	dir := t.TempDir()
	recs := newFakeRecords(dir, &dispatch.Record{ID: "D1", State: lifecycle.DispatchStarted})
	recs.setSupervising(true)
	s := &Supervisors{Bin: fakeAgora(t, dir, "exit 1"), Records: recs, Reaper: &lostReaper{f: recs}, Poll: 10 * time.Millisecond}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if _, err := s.Watch(ctx, &dispatch.Record{ID: "D1", State: lifecycle.DispatchStarted}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Watch = %v, want the context's error", err)
	}
	if got := recs.outcomes(); len(got) != 0 {
		t.Errorf("recorded outcomes %+v after the watcher stopped, want none", got)
	}
}

func TestSupervisors_Reap_Throttled(t *testing.T) {
	recs := newFakeRecords(t.TempDir())
	reaper := &lostReaper{f: recs}
	s := &Supervisors{Records: recs, Reaper: reaper}
	for range 3 {
		if err := s.Reap(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if n := reaper.count(); n != 1 {
		t.Fatalf("three calls within %v reaped %d times, want once", ReapEvery, n)
	}
	s.reapedAt.Store(time.Now().Add(-ReapEvery).UnixNano())
	if err := s.Reap(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := reaper.count(); n != 2 {
		t.Errorf("a call %v after the last reaped %d times in all, want twice", ReapEvery, n)
	}
}
