package dispatch_test

import (
	"bytes"
	"os"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// TestRedTeam28_CancelledBetweenAcceptAndStart: a cancel requested after the accept and before
// the supervisor starts the sandbox (the CLI's run and a server accept and supervise in one
// process, and no longer claim in between) is honoured: the agent never runs, the dispatch
// ends cancelled, and its audit holds no dispatch.started.
func TestRedTeam28_CancelledBetweenAcceptAndStart(t *testing.T) {
	e := newEnv(t)
	e.subagent("mark", "echo ran")
	r, err := e.d.Accept(t.Context(), dispatch.Request{Subagent: "mark", Actor: "test", Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.d.Records.RequestCancel(t.Context(), r.ID); err != nil {
		t.Fatal(err)
	}
	got, err := e.d.Supervise(t.Context(), r.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, a := range e.audited(r, "dispatch.*") {
		kinds = append(kinds, a.Kind)
	}
	t.Logf("%s (%s: %s) audit %v", got.State, got.Reason, got.Detail, kinds)
	if got.State != lifecycle.DispatchCancelled {
		t.Errorf("state %s (%s: %s), want cancelled", got.State, got.Reason, got.Detail)
	}
	for _, k := range kinds {
		if k == entry.DispatchStarted || k == entry.DispatchFinished {
			t.Errorf("audit %v: a cancelled dispatch was started", kinds)
		}
	}
	if got.Result != nil && got.Result.Stdout != nil && got.Result.Stdout.Size > 0 {
		t.Errorf("the agent ran (stdout %d bytes) although its dispatch was cancelled before it started", got.Result.Stdout.Size)
	}
}

// TestRedTeam28_SuperviseTwiceInOneProcess: a dispatch accepted by this process is no longer
// claimed again (66bbe9b), and Claim never told two goroutines of one process apart. Two
// supervisors of one process race for one accepted dispatch: exactly one runs it, and the record
// and its audit tell what ran. Failed before: the second staged over the first's stage
// ("stage bundle: mkdir .../bundle/capabilities: file exists") and failed the dispatch, audit
// [dispatch.accepted dispatch.failed]; the same at 99408dd.
func TestRedTeam28_SuperviseTwiceInOneProcess(t *testing.T) {
	e := newEnv(t)
	e.subagent("slow", "sleep 2; echo done")
	r, err := e.d.Accept(t.Context(), dispatch.Request{Subagent: "slow", Actor: "test", Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	finals := make([]*dispatch.Record, 2)
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() { finals[i], errs[i] = e.d.Supervise(t.Context(), r.ID, nil) })
	}
	wg.Wait()
	for i := range 2 {
		if errs[i] != nil {
			t.Errorf("supervisor %d: %v", i, errs[i])
		}
	}
	got, err := e.d.Records.Get(t.Context(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, a := range e.audited(r, "dispatch.*") {
		kinds = append(kinds, a.Kind)
	}
	t.Logf("record %s (%s: %s); audit %v", got.State, got.Reason, got.Detail, kinds)
	if got.State != lifecycle.DispatchFinished {
		t.Errorf("the dispatch ended %s (%s: %s), want finished: one supervisor ran it to its end", got.State, got.Reason, got.Detail)
	}
	want := []string{entry.DispatchAccepted, entry.DispatchStarted, entry.DispatchFinished}
	if len(kinds) != len(want) {
		t.Errorf("audit %v, want %v", kinds, want)
	}
}

// TestRedTeam28_TwoProcessesRaceForOneDispatch: two `agora dispatch supervise ID` processes,
// both children of the process that accepted the dispatch (so Claim lets either take it over
// from their parent), start at once: exactly one runs it. The audit holds one started and one
// finished, and the dispatch finished.
func TestRedTeam28_TwoProcessesRaceForOneDispatch(t *testing.T) {
	e := newEnv(t)
	e.subagent("slow2", "sleep 1; echo done")
	r, err := e.d.Accept(t.Context(), dispatch.Request{Subagent: "slow2", Actor: "test", Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var sups []*exec.Cmd
	var outs [2]bytes.Buffer
	for i := range 2 {
		sup := exec.Command(agoraBin, "dispatch", "supervise", r.ID)
		sup.Env = append(os.Environ(), "AGORA_HOME="+e.home.Dir)
		sup.Stdout, sup.Stderr = &outs[i], &outs[i]
		sups = append(sups, sup)
	}
	for _, sup := range sups {
		if err := sup.Start(); err != nil {
			t.Fatal(err)
		}
	}
	for i, sup := range sups {
		if err := sup.Wait(); err != nil {
			t.Logf("supervisor %d: %v\n%s", i, err, outs[i].String())
		}
	}
	got, err := e.d.Records.Get(t.Context(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, a := range e.audited(r, "dispatch.*") {
		kinds = append(kinds, a.Kind)
	}
	if got.State != lifecycle.DispatchFinished {
		t.Errorf("the dispatch ended %s (%s: %s), want finished", got.State, got.Reason, got.Detail)
	}
	want := []string{entry.DispatchAccepted, entry.DispatchStarted, entry.DispatchFinished}
	if !slices.Equal(kinds, want) {
		t.Errorf("audit %v, want %v", kinds, want)
	}
}
