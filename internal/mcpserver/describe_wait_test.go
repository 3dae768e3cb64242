package mcpserver_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agora-dev/agora/internal/mcpserver"
)

// TestDescribeWait_ManyWaitersShareOnePoll, against the server alone: many
// callers of agora_dispatch_describe with wait_seconds on one running dispatch block until it
// changes state, then all get the new state, well before their wait ends; while they wait the
// dispatch's record is read by one shared poll, not once per waiter per interval. A dispatch
// that already ended is described at once, and wait_seconds out of range is refused. Server
// and client run in a synctest bubble over pipes, the poll's intervals on its fake clock.
func TestDescribeWait_ManyWaitersShareOnePoll(t *testing.T) {
	synctest.Test(t, testDescribeWaitManyWaitersShareOnePoll)
}

func testDescribeWaitManyWaitersShareOnePoll(t *testing.T) {
	var state atomic.Value
	state.Store("started")
	var gets atomic.Int64
	fx := newFixture()
	fx.disp.get = func(_ context.Context, id string) (*mcpserver.Record, error) {
		gets.Add(1)
		return record(id, state.Load().(string)), nil
	}
	cs := fx.stdio(t, mcpserver.Principal{Client: "lead", Ceiling: mcpserver.CeilingRead}, mcpserver.Limits{Rate: 1000, Burst: 1000})

	const waiters, wait = 30, 120
	type got struct {
		state string
		took  time.Duration
	}
	results := make(chan got, waiters)
	var wg sync.WaitGroup
	for range waiters {
		wg.Go(func() {
			start := time.Now()
			var out loopOut
			decode(t, call(t, cs, "agora_dispatch_describe", map[string]any{"id": dispatchID, "wait_seconds": wait}), &out)
			results <- got{out.Dispatch.State, time.Since(start)}
		})
	}
	// Every waiter has read the record once (its describe) and joined the shared poll; then
	// hold them a while.
	synctest.Wait()
	if n := gets.Load(); n != waiters {
		t.Fatalf("%d describes reached the dispatcher, want %d", n, waiters)
	}
	before := gets.Load()
	time.Sleep(2 * mcpserver.PollMaxForTest)
	synctest.Wait()
	held := gets.Load() - before
	select {
	case g := <-results:
		t.Fatalf("a waiter returned %q after %s while nothing changed", g.state, g.took)
	default:
	}
	// One poll at most every 500ms, from 50ms: a handful of reads in a second. A poll per
	// waiter would be at least one read per waiter.
	if held >= waiters || held == 0 {
		t.Errorf("%d reads of the record in one second with %d waiters: the waiters do not share one poll", held, waiters)
	}
	state.Store("finished")
	wg.Wait()
	close(results)
	for g := range results {
		if g.state != "finished" {
			t.Errorf("a waiter returned %q, want finished", g.state)
		}
		if g.took >= wait/2*time.Second {
			t.Errorf("a waiter took %s of its %ds wait after the change", g.took, wait)
		}
	}

	// Ended: at once, whatever the wait.
	start := time.Now()
	var out loopOut
	decode(t, call(t, cs, "agora_dispatch_describe", map[string]any{"id": dispatchID, "wait_seconds": wait}), &out)
	if out.Dispatch.State != "finished" || time.Since(start) >= wait/2*time.Second {
		t.Errorf("describe of an ended dispatch with a wait: %q after %s", out.Dispatch.State, time.Since(start))
	}
	state.Store("needs_input")
	start = time.Now()
	decode(t, call(t, cs, "agora_dispatch_describe", map[string]any{"id": dispatchID, "wait_seconds": wait}), &out)
	if out.Dispatch.State != "needs_input" || time.Since(start) >= wait/2*time.Second {
		t.Errorf("describe of a dispatch in needs_input with a wait: %q after %s", out.Dispatch.State, time.Since(start))
	}
	for _, bad := range []any{-1, 301, "10", 1.5} {
		res := call(t, cs, "agora_dispatch_describe", map[string]any{"id": dispatchID, "wait_seconds": bad})
		if !res.IsError || !strings.Contains(text(res), "wait_seconds") {
			t.Errorf("wait_seconds %v: %q, want a refusal naming wait_seconds", bad, text(res))
		}
	}
}

// TestDescribeWait_ProgressAndCallerGone: a waiter with a progress token hears the state while
// it waits; a waiter whose call is cancelled leaves, and once none waits the shared poll stops
// reading the record. Server and client run in a synctest bubble over pipes: the poll's
// intervals pass on the bubble's fake clock.
func TestDescribeWait_ProgressAndCallerGone(t *testing.T) {
	synctest.Test(t, testDescribeWaitProgressAndCallerGone)
}

func testDescribeWaitProgressAndCallerGone(t *testing.T) {
	var gets atomic.Int64
	fx := newFixture()
	fx.disp.get = func(_ context.Context, id string) (*mcpserver.Record, error) {
		gets.Add(1)
		return record(id, "started"), nil
	}
	var prog progressLog
	cs := fx.stdioWith(t, mcpserver.Principal{Client: "lead", Ceiling: mcpserver.CeilingRead}, mcpserver.Limits{},
		&mcp.ClientOptions{ProgressNotificationHandler: prog.handler})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		params := &mcp.CallToolParams{Name: "agora_dispatch_describe", Arguments: map[string]any{"id": dispatchID, "wait_seconds": 60}}
		params.SetProgressToken("w1")
		_, err := cs.CallTool(ctx, params)
		done <- err
	}()
	synctest.Wait() // the waiter waits, having said so
	if len(prog.all()) == 0 {
		t.Fatal("no progress notification while waiting")
	}
	if m := prog.all()[0]; !strings.Contains(m, "dispatch "+dispatchID+" started") {
		t.Errorf("progress = %q, want the dispatch's state", m)
	}
	time.Sleep(3 * mcpserver.PollMaxForTest)
	synctest.Wait()
	if gets.Load() < 3 {
		t.Fatalf("%d reads of the record while its waiter waited: the shared poll does not run", gets.Load())
	}
	cancel()
	<-done
	synctest.Wait() // the waiter left, and the poll with it
	n := gets.Load()
	time.Sleep(10 * mcpserver.PollMaxForTest)
	synctest.Wait()
	if more := gets.Load() - n; more != 0 {
		t.Errorf("%d reads of the record after its only waiter left", more)
	}
}
