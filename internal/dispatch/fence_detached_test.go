package dispatch_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/dispatch/detach"
	"github.com/agora-dev/agora/internal/lease/fencefile"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// TestFence_DetachedSupervisorLogsItsDecision: a detached supervisor (started as serve starts
// one, detach.Supervisors, stderr no terminal) whose leader fence closes says that it leaves
// the dispatch's end to the leader in the home's supervisors' log, where an operator finds
// it. Failed before: its stderr was /dev/null, and the line was lost.
func TestFence_DetachedSupervisorLogsItsDecision(t *testing.T) {
	e := newEnv(t)
	e.subagent("quick", "echo done")
	ctx := t.Context()
	r, err := e.d.Accept(ctx, dispatch.Request{Subagent: "quick", Actor: "test", Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	const valid = 800 * time.Millisecond
	w, err := fencefile.Create(filepath.Join(e.home.Dir, "leader.fence"), valid)
	if err != nil {
		t.Fatal(err)
	}
	var renewing atomic.Bool
	renewing.Store(true)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			if renewing.Load() {
				w.Advance(bootNow(t) + int64(valid))
			}
			select {
			case <-stop:
				return
			case <-time.After(valid / 8):
			}
		}
	}()
	defer func() { close(stop); <-done }()
	// This process leads: its detached supervisors keep its fence (fencefile.ChildEnv).
	defer fencefile.SetInherited(w.Env())()

	// `agora dispatch supervise ID` is this test binary as TestFence_ChildSupervisor's child.
	task := t.TempDir()
	bin := filepath.Join(t.TempDir(), "agora")
	script := fmt.Sprintf("#!/bin/sh\nexec env %s=%s %s='%s' %s=%s %s='%s' %s='%s' '%s' -test.run='^TestFence_ChildSupervisor$' -test.v\n",
		pid1Role, fenceChildRole, fenceHomeEnv, e.home.Dir, fenceIDEnv, r.ID, fenceDirEnv, task,
		fenceWorkerEnv, e.d.Worker.Path, os.Args[0])
	if err := os.WriteFile(bin, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	sup := detach.For(e.d)
	sup.Bin = bin
	if started, err := sup.Start(ctx, r.ID); err != nil || started.State != lifecycle.DispatchStarted {
		t.Fatalf("the detached supervisor did not start the dispatch: %v %+v", err, started)
	}
	renewing.Store(false) // the leader is stopped
	time.Sleep(valid + 200*time.Millisecond)
	if err := os.WriteFile(filepath.Join(task, "end"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(e.d.StateDir, detach.LogFile)
	var log []byte
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		log, _ = os.ReadFile(logPath)
		if strings.Contains(string(log), "leaving the dispatch's end to the leader that holds the lease") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not say the fenced supervisor left the end to the leader:\n%s", logPath, log)
		}
	}
	for _, want := range []string{"dispatch=" + r.ID, "not renewed in time"} {
		if !strings.Contains(string(log), want) {
			t.Errorf("the supervisors' log lacks %q:\n%s", want, log)
		}
	}
	if fi, err := os.Stat(logPath); err != nil {
		t.Error(err)
	} else if fi.Mode().Perm() != 0o600 {
		t.Errorf("the supervisors' log is mode %v, want 0600", fi.Mode().Perm())
	}
	if final, err := e.d.Records.Get(ctx, r.ID); err != nil || final.State != lifecycle.DispatchStarted {
		t.Errorf("a fenced supervisor committed the dispatch's end: %v %+v", err, final)
	}
	// The fenced supervisor releases the host's side of its stage after it logs (as root its
	// disk quota and pinned content's tmpfs): the test's home is removed only after that.
	stage := filepath.Join(e.d.StateDir, r.ID)
	agoratest.Eventually(t, time.Minute, "the fenced supervisor to release its stage", func() error {
		if m := agoratest.MountsUnder(t, stage); len(m) > 0 {
			return fmt.Errorf("still mounted: %v", m)
		}
		return nil
	})
}
