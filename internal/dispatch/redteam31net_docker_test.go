package dispatch_test

import (
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// TestRedTeam31_DockerSecondHolderSparesClaimedSlot is the attack on the docker
// slots' sweep: two resident processes hold warm slots of one home (as orch serve and mcp
// serve both hold bubblewrap slots of one home; the sweep is written for a live holder beside
// a dead one). The second one's StartWarm sweeps slot containers "whose slot no longer
// stands", and a claimed slot's gateway directory is gone from its claim on: the first
// holder's dispatch running in a claimed slot must not be killed by it.
func TestRedTeam31_DockerSecondHolderSparesClaimedSlot(t *testing.T) {
	e, w := dockerWarmEnv(t, 1)
	e.subagent("sleeper", `echo started; sleep 120`)
	req := dispatch.Request{Subagent: "sleeper", Target: "box", Timeout: 3 * time.Minute, Actor: "test"}
	ctx := t.Context()
	start := func() (*dispatch.Record, chan *dispatch.Record, string) {
		r, err := e.d.Accept(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan *dispatch.Record, 1)
		go func() {
			rec, err := e.d.Supervise(ctx, r.ID, nil)
			if err != nil {
				t.Error(err)
			}
			done <- rec
		}()
		var task string
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline) && task == ""; time.Sleep(50 * time.Millisecond) {
			if cur, err := e.d.Records.Get(ctx, r.ID); err == nil {
				task = cur.ProviderTaskID
			}
		}
		if task == "" {
			t.Fatalf("dispatch %s: no task recorded", r.ID)
		}
		return r, done, task
	}
	cancel := func(r *dispatch.Record, done chan *dispatch.Record) *dispatch.Record {
		if _, err := e.d.Cancel(ctx, r.ID); err != nil {
			t.Fatal(err)
		}
		select {
		case final := <-done:
			return final
		case <-time.After(60 * time.Second):
			t.Fatalf("dispatch %s: not over within 60 s of its cancel", r.ID)
		}
		return nil
	}
	// The cold dispatch teaches the pool its shape.
	cold, coldDone, _ := start()
	cancel(cold, coldDone)
	for deadline := time.Now().Add(90 * time.Second); boxCounts(w).Ready < 1; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("docker warm slots: %+v, want 1 ready", boxCounts(w))
		}
	}
	hot, hotDone, task := start()
	if c := boxCounts(w); c.Claimed != 1 {
		t.Fatalf("counts %+v: the dispatch did not claim the slot", c)
	}
	// Its task is recorded once the slot's worker took the grant: the slot is claimed and its
	// gateway directory gone.

	// A second resident holder of the same home starts.
	d2 := *e.d
	d2.Warm = nil
	w2, err := d2.StartWarm(ctx)
	if err != nil || w2 == nil {
		t.Fatalf("second StartWarm: %v, %v", w2, err)
	}
	defer w2.Close() // again, once more: a second Close must return

	cli, err := client.New(client.WithHost(containerHost()), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.ContainerInspect(ctx, strings.TrimPrefix(task, "docker:"), client.ContainerInspectOptions{}); err != nil {
		t.Errorf("the first holder's claimed slot container %s is gone after a second holder started: %v", task, err)
	}
	select {
	case final := <-hotDone:
		t.Fatalf("the first holder's warm dispatch ended %s (%s: %s) when a second holder started", final.State, final.Reason, final.Detail)
	case <-time.After(2 * time.Second):
	}
	if final := cancel(hot, hotDone); final == nil || final.State != lifecycle.DispatchCancelled {
		t.Errorf("warm dispatch ended %+v, want cancelled", final)
	}

	// The second holder stops. The first one's gateway must still be where its slot
	// containers (those it starts from now on too) find it: the second must neither have taken
	// its socket's path over nor removed it on the way out.
	w2.Close()
	socks, _ := filepath.Glob(filepath.Join(filepath.Dir(e.d.StateDir), "gateway", "slots*.sock"))
	served := false
	for _, sock := range socks {
		if c, err := net.DialTimeout("unix", sock, time.Second); err == nil {
			c.Close()
			served = true
		}
	}
	if !served {
		t.Errorf("after a second holder came and went, no slot gateway socket of the first answers (%v)", socks)
	}
}
