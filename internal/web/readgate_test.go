package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/api"
)

// turnLog records, in order, whose read of a run each turn of the reads gate served, and
// makes each read slow, as a large run's is.
type turnLog struct {
	*orch.Reader
	mu sync.Mutex
	// who is the principal of each read, in the order they began; guarded by mu.
	who []string
}

func (l *turnLog) Run(ctx context.Context, ref string) (api.Run, error) {
	l.add(principalOf(ctx).name)
	time.Sleep(10 * time.Millisecond)
	return l.Reader.Run(ctx, ref)
}

func (l *turnLog) add(name string) {
	l.mu.Lock()
	l.who = append(l.who, name)
	l.mu.Unlock()
}

// since returns the log from entry i on.
func (l *turnLog) since(i int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.who[i:]...)
}

func (l *turnLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.who)
}

// TestServer_ReaderCannotStarveOperator: a read-only token fires 64 slow
// reads of a large run at once, half with its bearer token and half through a session of
// its own; the operator's page load, sent while they wait, is answered within a few of the
// reader's turns, not after all of them (nor 503 after readWait). Turns are counted, not
// timed: the log says whose read each turn served.
func TestServer_ReaderCannotStarveOperator(t *testing.T) {
	o := wideRun(500)
	runs := &turnLog{Reader: o.store(t)}
	e := startWith(t, Sources{Orch: o, Runs: runs, Dispatches: fakeDispatches{map[string]*dispatch.Record{}}})
	bobSession, _ := login(t, e, readToken)
	alice, _ := login(t, e, opToken)

	attack, stop := context.WithCancel(t.Context())
	defer stop()
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	defer tr.CloseIdleConnections()
	bearer := &http.Client{Transport: tr}
	bobSession.Transport = tr
	const n = 64
	codes := make(chan int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(attack, "GET", e.base+"/runs/run1", nil)
			c := bobSession
			if i%2 == 0 {
				req.Header.Set("Authorization", "Bearer "+readToken)
				c = bearer
			}
			resp, err := c.Do(req)
			if err != nil {
				codes <- 0 // cancelled below, while it waited
				return
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
				t.Errorf("429 without Retry-After")
			}
			codes <- resp.StatusCode
		})
	}
	// The reader's requests are all sent at once; once it has had a few turns the rest wait.
	for deadline := time.Now().Add(10 * time.Second); runs.len() < 3; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the reader's reads never began")
		}
	}
	mark := runs.len()
	resp, err := alice.Get(e.base + "/runs/run1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the operator's page: status %d while a reader floods the view, want 200", resp.StatusCode)
	}
	// Turns the reader took after the operator asked and before the operator's read: the
	// one under way, and at most one more begun before the request reached the gate (the
	// bound is generous: the old gate gave every waiting reader its turn first).
	ahead := 0
	for _, who := range runs.since(mark) {
		if who == "alice" {
			break
		}
		ahead++
	}
	t.Logf("the reader took %d turns before the operator's read", ahead)
	if ahead > 4 {
		t.Errorf("the reader took %d turns before the operator's read, want at most a few", ahead)
	}

	// The reader goes away: its waiting requests leave its queue.
	stop()
	wg.Wait()
	close(codes)
	for deadline := time.Now().Add(10 * time.Second); e.srv.reads.waiting("bob") > 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of the gone reader's requests still wait", e.srv.reads.waiting("bob"))
		}
	}
	byCode := map[int]int{}
	for c := range codes {
		byCode[c]++
		if c != 0 && c != http.StatusOK && c != http.StatusTooManyRequests {
			t.Errorf("a reader's request got %d, want 200, or 429 beyond its cap", c)
		}
	}
	t.Logf("the reader's requests by status (0: cancelled while waiting): %v", byCode)
}

// waitWaiting waits until client has n requests waiting at g.
func waitWaiting(t *testing.T, g *gate, client string, n int) {
	t.Helper()
	agoratest.WaitFor(t, 10*time.Second, fmt.Sprintf("%s to have %d requests waiting", client, n),
		func() bool { return g.waiting(client) == n })
}

// TestGate_RoundRobin: turns go round the clients that wait, one request each, whatever
// the number each has waiting; a client beyond maxClientWaiting is refused at once and
// takes nobody's place.
func TestGate_RoundRobin(t *testing.T) {
	g := newGate(1)
	if err := g.enter(t.Context(), "holder"); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []string
	var wg sync.WaitGroup
	queue := func(client string, n int) {
		for range n {
			wg.Go(func() {
				if err := g.enter(t.Context(), client); err != nil {
					t.Errorf("%s: %v", client, err)
					return
				}
				mu.Lock()
				got = append(got, client)
				mu.Unlock()
				g.release()
			})
		}
	}
	queue("bob", maxClientWaiting)
	waitWaiting(t, g, "bob", maxClientWaiting)
	if err := g.enter(t.Context(), "bob"); !errors.Is(err, errTooMany) {
		t.Errorf("bob's request beyond %d waiting: %v, want errTooMany", maxClientWaiting, err)
	}
	queue("alice", 2)
	waitWaiting(t, g, "alice", 2)
	queue("carol", 1)
	waitWaiting(t, g, "carol", 1)
	g.release() // holder's turn ends
	wg.Wait()
	want := []string{"bob", "alice", "carol", "bob", "alice"}
	for range maxClientWaiting - 2 {
		want = append(want, "bob")
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("order of turns (-want +got):\n%s", diff)
	}
	if g.busy != 0 || len(g.queues) != 0 || len(g.order) != 0 {
		t.Errorf("after every turn: busy %d, queues %v, order %v; want all empty", g.busy, g.queues, g.order)
	}
}

// TestGate_CancelledLeaveQueue: a client's requests that end while they wait (the browser
// went away) leave its queue: they take no turn, and the client may queue again up to its
// cap.
func TestGate_CancelledLeaveQueue(t *testing.T) {
	g := newGate(1)
	if err := g.enter(t.Context(), "holder"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for range maxClientWaiting {
		wg.Go(func() {
			if err := g.enter(ctx, "bob"); !errors.Is(err, context.Canceled) {
				t.Errorf("a cancelled wait: %v, want context.Canceled", err)
			}
		})
	}
	waitWaiting(t, g, "bob", maxClientWaiting)
	cancel()
	wg.Wait()
	if n := g.waiting("bob"); n != 0 {
		t.Fatalf("%d cancelled requests still wait", n)
	}
	var turns atomic.Int32
	for range maxClientWaiting {
		wg.Go(func() {
			if err := g.enter(t.Context(), "bob"); err != nil {
				t.Errorf("bob queues again: %v", err)
				return
			}
			turns.Add(1)
			g.release()
		})
	}
	waitWaiting(t, g, "bob", maxClientWaiting)
	g.release()
	wg.Wait()
	if n := turns.Load(); n != maxClientWaiting {
		t.Errorf("%d turns, want %d", n, maxClientWaiting)
	}
	if g.busy != 0 || len(g.order) != 0 {
		t.Errorf("busy %d, order %v after every turn; want none", g.busy, g.order)
	}
}
