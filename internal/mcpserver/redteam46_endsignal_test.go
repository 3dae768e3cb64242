package mcpserver_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/mcpserver"
)

// The end signal of f90be98 (mcpserver.EndSignal: the shared poll reads a
// waited-on dispatch's record the moment its supervisor says the end is committed). A signal
// only ever causes a read; what a waiter is told is what that read returned.

// rt46Store is a fake store of dispatch states with its reads counted per dispatch, and the
// end signal of each dispatch with the times the poll asked for it.
type rt46Store struct {
	mu     sync.Mutex
	state  map[string]string
	reads  map[string]int
	sig    map[string]chan struct{}
	asked  map[string]int
	onRead func(id string, n int) // called with the read's number, before it is answered; mu held
}

func newRT46Store() *rt46Store {
	return &rt46Store{state: map[string]string{}, reads: map[string]int{}, sig: map[string]chan struct{}{}, asked: map[string]int{}}
}

// fixture is a server fixture whose dispatches are read from s and signalled by s.
func (s *rt46Store) fixture() *fixture {
	fx := newFixture()
	fx.disp.get, fx.disp.ended = s.get, s.ended
	return fx
}

func (s *rt46Store) set(id, state string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state[id] = state
}

func (s *rt46Store) get(_ context.Context, id string) (*mcpserver.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.state[id]
	if !ok {
		return nil, mcpserver.ErrNotFound
	}
	s.reads[id]++
	if s.onRead != nil {
		s.onRead(id, s.reads[id])
		st = s.state[id]
	}
	return record(id, st), nil
}

func (s *rt46Store) ended(id string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked[id]++
	if c, ok := s.sig[id]; ok {
		return c
	}
	return nil
}

func (s *rt46Store) readsOf(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads[id]
}

func (s *rt46Store) askedOf(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.asked[id]
}

// waitFor polls cond until it holds, or fails the test after a generous while (the test's
// own deadline, not an assertion of speed).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
	}
}

type rt46Answer struct {
	id, state string
	err       error
}

func rt46Describe(cs *mcp.ClientSession, id string, wait int) rt46Answer {
	var out loopOut
	res, err := callErr(cs, "agora_dispatch_describe", map[string]any{"id": id, "wait_seconds": wait})
	if err == nil {
		err = decodeErr(res, &out)
	}
	return rt46Answer{out.Dispatch.ID, out.Dispatch.State, err}
}

// TestRedTeam46_SignalWakesOnlyItsOwnDispatch: two dispatches are waited on, both finished in
// the store, polls held off for an hour. Closing A's signal reads A once and answers A's
// waiter finished; B's waiter is not woken by it (B is never read by the poll: its waiter gets
// what it had, started, at the end of its wait), so one dispatch's signal never answers for
// another, and a closed signal is read once, not re-selected in a loop.
func TestRedTeam46_SignalWakesOnlyItsOwnDispatch(t *testing.T) {
	mcpserver.SetPollForTest(t, time.Hour, time.Hour)
	const a, b = "01ARZ3NDEKTSV4RRFFQ69G5FAA", "01ARZ3NDEKTSV4RRFFQ69G5FBB"
	st := newRT46Store()
	st.set(a, "started")
	st.set(b, "started")
	st.sig[a], st.sig[b] = make(chan struct{}), make(chan struct{})
	fx := st.fixture()
	cs := fx.stdio(t, mcpserver.Principal{Client: "lead", Ceiling: mcpserver.CeilingRead}, mcpserver.Limits{Rate: 1000, Burst: 1000})

	ga, gb := make(chan rt46Answer, 1), make(chan rt46Answer, 1)
	go func() { ga <- rt46Describe(cs, a, 60) }()
	go func() { gb <- rt46Describe(cs, b, 2) }()
	// Each waiter's poll has asked for its signal: both wait on their feeds.
	waitFor(t, "both polls asked for their signals", func() bool { return st.askedOf(a) == 1 && st.askedOf(b) == 1 })
	readsA, readsB := st.readsOf(a), st.readsOf(b)
	st.set(a, "finished")
	st.set(b, "finished")
	close(st.sig[a])
	got := <-ga
	if got.err != nil || got.id != a || got.state != "finished" {
		t.Fatalf("A's waiter after A's signal = %+v; want A finished", got)
	}
	got = <-gb
	if got.err != nil || got.id != b || got.state != "started" {
		t.Fatalf("B's waiter after A's signal only = %+v; want B started at the end of its wait (nothing read B)", got)
	}
	if n := st.readsOf(b) - readsB; n != 0 {
		t.Errorf("A's signal read B %d times", n)
	}
	if n := st.readsOf(a) - readsA; n != 1 {
		t.Errorf("A's signal read A %d times, want once (a closed signal re-selected spins)", n)
	}
}

// TestRedTeam46_ClosedSignalReadOnceThenPolls: a dispatch whose signal closed before anyone
// waited (its supervisor handed it on: the record is not final) is read once at the poll's
// start and then only at the poll's interval: with the polls held off, a wait of 2 s sees
// exactly one read by the poll, not a spin on the closed channel.
func TestRedTeam46_ClosedSignalReadOnceThenPolls(t *testing.T) {
	mcpserver.SetPollForTest(t, time.Hour, time.Hour)
	st := newRT46Store()
	st.set(dispatchID, "started")
	st.sig[dispatchID] = make(chan struct{})
	close(st.sig[dispatchID])
	fx := st.fixture()
	cs := fx.stdio(t, mcpserver.Principal{Client: "lead", Ceiling: mcpserver.CeilingRead}, mcpserver.Limits{Rate: 1000, Burst: 1000})
	got := rt46Describe(cs, dispatchID, 2)
	if got.err != nil || got.state != "started" {
		t.Fatalf("describe = %+v; want started at the end of its wait", got)
	}
	// One read by the describe itself, one by the poll at the closed signal.
	if n := st.readsOf(dispatchID); n != 2 {
		t.Errorf("%d reads over a 2 s wait with a closed signal and polls held off, want 2 (describe + one at the signal)", n)
	}
}

// TestRedTeam46_HandedOnKeepsPolling: the supervisor exits having handed the dispatch to
// another (signal closed, record still started): the poll goes on at its interval and the
// wait ends, finished, when a later read finds the end; what the waiter gets is that read.
func TestRedTeam46_HandedOnKeepsPolling(t *testing.T) {
	mcpserver.SetPollForTest(t, 5*time.Millisecond, 10*time.Millisecond)
	st := newRT46Store()
	st.set(dispatchID, "started")
	sig := make(chan struct{})
	close(sig) // the first supervisor exited: handed on
	st.sig[dispatchID] = sig
	// The dispatch call's own record is started; the poll's 1st read (at the closed signal)
	// still finds it started; the 4th finds it finished under the next supervisor.
	st.onRead = func(id string, n int) {
		if n >= 4 {
			st.state[id] = "finished"
		}
	}
	fx := st.fixture()
	fx.disp.dispatch = func(context.Context, mcpserver.DispatchRequest) (*mcpserver.Record, error) {
		return record(dispatchID, "started"), nil
	}
	cs := fx.stdio(t, mcpserver.Principal{Client: "lead", Ceiling: mcpserver.CeilingDispatch}, mcpserver.Limits{Rate: 1000, Burst: 1000})
	var out loopOut
	decode(t, call(t, cs, "agora_dispatch", map[string]any{"subagent": "writer", "wait_seconds": 60}), &out)
	if out.Dispatch.State != "finished" {
		t.Fatalf("agora_dispatch of a handed-on dispatch = %q; want finished (the polls go on after the signal)", out.Dispatch.State)
	}
	if n := st.readsOf(dispatchID); n < 4 {
		t.Errorf("%d reads; the finished answer came from no read", n)
	}
}

// TestRedTeam46_NoSignalStillPolls: a dispatch this server did not start (another agora mcp
// process's: Ended says nil) is still followed by polling: describe with wait_seconds ends at
// the change a read finds.
func TestRedTeam46_NoSignalStillPolls(t *testing.T) {
	mcpserver.SetPollForTest(t, 5*time.Millisecond, 10*time.Millisecond)
	st := newRT46Store()
	st.set(dispatchID, "started")
	st.onRead = func(id string, n int) {
		if n >= 3 {
			st.state[id] = "finished"
		}
	}
	fx := st.fixture()
	cs := fx.stdio(t, mcpserver.Principal{Client: "lead", Ceiling: mcpserver.CeilingRead}, mcpserver.Limits{Rate: 1000, Burst: 1000})
	got := rt46Describe(cs, dispatchID, 60)
	if got.err != nil || got.state != "finished" {
		t.Fatalf("describe of a dispatch with no signal = %+v; want finished by polling", got)
	}
	// Asked once a round while there is none (a waiter may join before the dispatcher has
	// the signal of a dispatch it is starting), so at most once per read and once more.
	if a, r := st.askedOf(dispatchID), st.readsOf(dispatchID); a < 1 || a > r+1 {
		t.Errorf("Ended asked %d times over %d reads, want once a round", a, r)
	}
}

// TestRedTeam46_ResumeUsesTheChildsSignal: agora_dispatch with resume follows the child the
// answer started, on the child's signal (polls held off): the answer is the child, finished,
// and the parent's signal, closed long ago, does not stand in for it.
func TestRedTeam46_ResumeUsesTheChildsSignal(t *testing.T) {
	mcpserver.SetPollForTest(t, time.Hour, time.Hour)
	const parent, child = "01ARZ3NDEKTSV4RRFFQ69G5FPA", "01ARZ3NDEKTSV4RRFFQ69G5FCH"
	st := newRT46Store()
	st.set(parent, "needs_input")
	st.set(child, "started")
	st.sig[parent] = make(chan struct{})
	close(st.sig[parent])
	st.sig[child] = make(chan struct{})
	fx := st.fixture()
	fx.disp.resume = func(_ context.Context, id, _, _ string) (*mcpserver.Record, error) {
		if id != parent {
			return nil, mcpserver.ErrNotFound
		}
		st.set(parent, "answered")
		return record(child, "started"), nil
	}
	cs := fx.stdio(t, mcpserver.Principal{Client: "lead", Ceiling: mcpserver.CeilingDispatch}, mcpserver.Limits{Rate: 1000, Burst: 1000})
	got := make(chan rt46Answer, 1)
	go func() {
		var out loopOut
		res, err := callErr(cs, "agora_dispatch", map[string]any{"resume": map[string]any{"dispatch": parent, "answer": "yes"}, "wait_seconds": 60})
		if err == nil {
			err = decodeErr(res, &out)
		}
		got <- rt46Answer{out.Dispatch.ID, out.Dispatch.State, err}
	}()
	waitFor(t, "the child's poll asked for its signal", func() bool { return st.askedOf(child) == 1 })
	if st.askedOf(parent) != 0 {
		t.Errorf("the resume's wait asked for the parent's signal")
	}
	st.set(child, "finished")
	close(st.sig[child])
	a := <-got
	if a.err != nil || a.id != child || a.state != "finished" {
		t.Fatalf("resume = %+v; want the child %s finished", a, child)
	}
}

// TestRedTeam46_HiddenDispatchNeverAsksTheSignal: a dispatch an MCP client may not see (the
// dispatcher refuses its read: dispatch.MCPHidden, or unknown) is refused before any wait, so
// its end signal is never asked for and no poll starts: Ended cannot tell a client that it
// exists, nor let it wait on it.
func TestRedTeam46_HiddenDispatchNeverAsksTheSignal(t *testing.T) {
	mcpserver.SetPollForTest(t, 5*time.Millisecond, 10*time.Millisecond)
	const hidden = "01ARZ3NDEKTSV4RRFFQ69G5FHH"
	var asked atomic.Int64
	sig := make(chan struct{})
	fx := newFixture()
	fx.disp.get = func(_ context.Context, id string) (*mcpserver.Record, error) {
		if id == hidden {
			return nil, &mcpserver.RequestError{Msg: "dispatch " + id + " works on a repository path given on the host's command line"}
		}
		return nil, mcpserver.ErrNotFound
	}
	fx.disp.ended = func(string) <-chan struct{} { asked.Add(1); return sig }
	cs := fx.stdio(t, mcpserver.Principal{Client: "lead", Ceiling: mcpserver.CeilingDispatch}, mcpserver.Limits{Rate: 1000, Burst: 1000})
	for _, id := range []string{hidden, "01ARZ3NDEKTSV4RRFFQ69G5FNZ"} {
		res, err := callErr(cs, "agora_dispatch_describe", map[string]any{"id": id, "wait_seconds": 30})
		if err != nil || !res.IsError {
			t.Fatalf("describe wait of %s = %v, %v; want a tool error", id, res, err)
		}
	}
	if n := asked.Load(); n != 0 {
		t.Errorf("Ended asked %d times for dispatches the client may not see", n)
	}
}

// TestRedTeam46_WaitersLeaveNoGoroutines: many waits on dispatches whose signals never close
// (their supervisors run on), polls held off for an hour: waiters that time out, and waiters
// whose client cancels the call, leave; their polls (parked on an open signal and an hour's
// timer) stop with them, and the process is back to its goroutines from before.
//
// Server and client run in a synctest bubble over pipes: the waits time out on its fake clock,
// and the count is taken once every goroutine of the session waits.
func TestRedTeam46_WaitersLeaveNoGoroutines(t *testing.T) {
	synctest.Test(t, testRedTeam46WaitersLeaveNoGoroutines)
}

func testRedTeam46WaitersLeaveNoGoroutines(t *testing.T) {
	mcpserver.SetPollForTest(t, time.Hour, time.Hour)
	st := newRT46Store()
	const n = 40
	const crockford = "ABCDEFGHJKMNPQRSTVWXYZ"
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "01ARZ3NDEKTSV4RRFFQ69G5" + string(crockford[i/len(crockford)]) + string(crockford[i%len(crockford)]) + "X"
		st.set(ids[i], "started")
		st.sig[ids[i]] = make(chan struct{}) // never closed
	}
	fx := st.fixture()
	cs := fx.stdio(t, mcpserver.Principal{Client: "lead", Ceiling: mcpserver.CeilingRead}, mcpserver.Limits{Rate: 10000, Burst: 10000})
	// A warm-up call: the session's own goroutines are up before the count.
	if a := rt46Describe(cs, ids[0], 0); a.err != nil {
		t.Fatal(a.err)
	}
	synctest.Wait()
	base := agoratest.BubbleGoroutines()

	var wg sync.WaitGroup
	// Half time out (two waiters per dispatch: one shared poll each)...
	for i := range n / 2 {
		for range 2 {
			wg.Go(func() {
				if a := rt46Describe(cs, ids[i], 1); a.err != nil || a.state != "started" {
					t.Errorf("describe %s = %+v; want started at the end of its wait", ids[i], a)
				}
			})
		}
	}
	// ...half are cancelled by their client mid-wait.
	ctx, cancel := context.WithCancel(context.Background())
	for i := n / 2; i < n; i++ {
		wg.Go(func() {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "agora_dispatch_describe", Arguments: map[string]any{"id": ids[i], "wait_seconds": 300}})
			if err == nil {
				t.Errorf("describe %s answered though cancelled and nothing changed", ids[i])
			}
		})
	}
	waitFor(t, "every poll asked for its signal", func() bool {
		for _, id := range ids[1:] {
			if st.askedOf(id) == 0 {
				return false
			}
		}
		return true
	})
	cancel()
	wg.Wait()
	synctest.Wait()
	agoratest.SettleBubble(t, base, "after every waiter left")
	for _, id := range ids {
		if r := st.readsOf(id); r > 3 {
			t.Errorf("%s read %d times with polls held off and an open signal", id, r)
		}
	}
}

// TestRedTeam46_CancelMidWait: agora_dispatch_cancel by another call while agora_dispatch
// waits: the supervisor's exit closes the signal, and the waiter answers with what the read
// after it found, cancelled (polls held off: only the signal could have told it).
func TestRedTeam46_CancelMidWait(t *testing.T) {
	mcpserver.SetPollForTest(t, time.Hour, time.Hour)
	st := newRT46Store()
	sig := make(chan struct{})
	st.sig[dispatchID] = sig
	fx := st.fixture()
	fx.disp.dispatch = func(context.Context, mcpserver.DispatchRequest) (*mcpserver.Record, error) {
		st.set(dispatchID, "started")
		return record(dispatchID, "started"), nil
	}
	fx.disp.cancel = func(_ context.Context, id string) (*mcpserver.Record, error) {
		st.set(id, "cancelled")
		close(sig) // the supervisor sees the cancel, records it and exits
		return record(id, "cancelled"), nil
	}
	cs := fx.stdio(t, mcpserver.Principal{Client: "lead", Ceiling: mcpserver.CeilingDispatch}, mcpserver.Limits{Rate: 1000, Burst: 1000})
	got := make(chan rt46Answer, 1)
	go func() {
		var out loopOut
		res, err := callErr(cs, "agora_dispatch", map[string]any{"subagent": "writer", "wait_seconds": 60})
		if err == nil {
			err = decodeErr(res, &out)
		}
		got <- rt46Answer{out.Dispatch.ID, out.Dispatch.State, err}
	}()
	waitFor(t, "the dispatch's poll asked for its signal", func() bool { return st.askedOf(dispatchID) == 1 })
	var out loopOut
	decode(t, call(t, cs, "agora_dispatch_cancel", map[string]any{"id": dispatchID}), &out)
	a := <-got
	if a.err != nil || a.state != "cancelled" {
		t.Fatalf("agora_dispatch waiting through a cancel = %+v; want cancelled", a)
	}
}
