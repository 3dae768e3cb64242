package web

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/mcpserver"
	"github.com/agora-dev/agora/internal/orch/api"
)

// A run page's event stream, served in a synctest bubble: the hub, the stream's batch window,
// its recount and its keepalive run on the bubble's fake clock, which moves only when every
// goroutine of the server waits. So the test says what the page has been sent at each
// instant: nothing of a batch before its window ends, all of it when it does.

// streamRecorder is a ResponseWriter that keeps what a stream wrote, for the test to read
// once the bubble has settled.
type streamRecorder struct {
	header http.Header
	mu     sync.Mutex
	buf    strings.Builder
}

func (r *streamRecorder) Header() http.Header { return r.header }
func (r *streamRecorder) WriteHeader(int)     {}
func (r *streamRecorder) Flush()              {}

func (r *streamRecorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.Write(p)
}

// messages are the stream's messages so far: "event NAME: DATA" for an event, the comment's
// text (": keepalive") for a comment.
func (r *streamRecorder) messages() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, m := range strings.Split(r.buf.String(), "\n\n") {
		var event, data string
		for _, l := range strings.Split(m, "\n") {
			switch {
			case strings.HasPrefix(l, "event: "):
				event = strings.TrimPrefix(l, "event: ")
			case strings.HasPrefix(l, "data: "):
				data = strings.TrimPrefix(l, "data: ")
			case strings.HasPrefix(l, ": "):
				out = append(out, l)
			}
		}
		if event != "" {
			out = append(out, "event "+event+": "+data)
		}
	}
	return out
}

// TestSSE_RunStreamOnTheClock: task changes within batchWindow travel in one "tasks" event (and
// the listed rows that changed) when the window ends, never before it; the counts follow
// streamFresh after that batch; an idle stream sends a keepalive every keepalive, and nothing
// in between.
func TestSSE_RunStreamOnTheClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := newFakeOrch(api.Task{ID: "a", State: lifecycle.TaskRunning, Subagent: "coder", DispatchID: "d1", Dispatches: []string{"d1"}},
			api.Task{ID: "b", State: lifecycle.TaskPending, Subagent: "coder", DependsOn: []string{"a"}, Needs: []string{"a"}, Locks: []string{"repo"}})
		src := Sources{Orch: o, Dispatches: fakeDispatches{map[string]*dispatch.Record{}}}
		src.Runs = o.store(t)
		const addr = "127.0.0.1:8080"
		srv, err := New(Config{Addr: addr, Clients: []mcpserver.Client{{Name: "bob", Token: readToken, Ceiling: mcpserver.CeilingRead}}}, src)
		if err != nil {
			t.Fatal(err)
		}
		var served sync.WaitGroup
		defer served.Wait()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel() // before the wait: the page's stream and the hub end with ctx
		served.Go(func() { srv.RunHub(ctx) })
		h := srv.Handler(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080})
		req := httptest.NewRequestWithContext(ctx, "GET", "/api/runs/run1/events?tasks=a,b", nil)
		req.Host = addr
		req.Header.Set("Authorization", "Bearer "+readToken)
		rec := &streamRecorder{header: http.Header{}}
		served.Go(func() { h.ServeHTTP(rec, req) })

		synctest.Wait()
		want := func(when string, n int) []string {
			t.Helper()
			synctest.Wait()
			got := rec.messages()
			if len(got) != n {
				t.Fatalf("%s: %d messages, want %d:\n%s", when, len(got), n, strings.Join(got, "\n"))
			}
			return got
		}
		if got := want("at the start", 1); !strings.HasPrefix(got[0], "event snapshot: ") || !strings.Contains(got[0], `"tasks":{"a":"running","b":"pending"}`) {
			t.Fatalf("first message %q, want the snapshot with the listed tasks' states", got[0])
		}

		o.set("a", lifecycle.TaskSucceeded)
		time.Sleep(batchWindow / 2)
		o.set("b", lifecycle.TaskRunning)
		time.Sleep(batchWindow/2 - time.Millisecond)
		want("a millisecond before the batch window ends", 1)
		time.Sleep(time.Millisecond)
		got := want("when the batch window ends", 3)
		if got[1] != `event tasks: {"a":"succeeded","b":"running"}` {
			t.Errorf("the batch is %q, want both changes in one tasks event", got[1])
		}
		if !strings.HasPrefix(got[2], "event rows: ") || !strings.Contains(got[2], `\"a\"`) || !strings.Contains(got[2], `\"b\"`) {
			t.Errorf("the rows after the batch are %q, want both listed rows", got[2])
		}

		time.Sleep(streamFresh - time.Millisecond)
		want("a millisecond before the recount", 3)
		time.Sleep(time.Millisecond)
		if got := want("at the recount", 4); !strings.HasPrefix(got[3], "event snapshot: ") || !strings.Contains(got[3], `"succeeded":1`) {
			t.Errorf("the recount is %q, want a snapshot counting a succeeded", got[3])
		}

		// The stream started batchWindow + streamFresh ago: its first keepalive is due
		// keepalive after its start, its second keepalive later.
		time.Sleep(keepalive - batchWindow - streamFresh - time.Millisecond)
		want("a millisecond before the keepalive", 4)
		time.Sleep(time.Millisecond)
		if got := want("at the keepalive", 5); got[4] != ": keepalive" {
			t.Errorf("message %q, want a keepalive comment", got[4])
		}
		time.Sleep(keepalive)
		want("at the second keepalive", 6)
	})
}
