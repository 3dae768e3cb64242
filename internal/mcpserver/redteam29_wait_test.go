package mcpserver_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/mcpserver"
)

// TestRedTeam29_HTTPWaiterLeavesWithItsConnection: a client that
// asks agora_dispatch_describe to wait and then drops the connection (no cancel
// notification: the TCP connection just closes) must take its wait with it. Otherwise a
// client bounded to MaxInFlight concurrent requests could leave any number of waits behind
// by dropping connections, each held for up to 300 s. After more drops than MaxInFlight, a
// new call is served, and the shared poll of the dispatch stops once they are all gone.
//
// Each drop comes once the server holds the wait (its waiter is counted on the dispatch's
// shared poll), and the wait must then leave while its 60 s still run: the waiter count
// going back to none is the signal, within a bound well short of the wait.
func TestRedTeam29_HTTPWaiterLeavesWithItsConnection(t *testing.T) {
	f := newFixture()
	f.disp.get = func(_ context.Context, id string) (*mcpserver.Record, error) { return record(id, "started"), nil }
	token := newToken(t)
	addr := f.http(t, mcpserver.HTTPConfig{Clients: clients(token), Limits: mcpserver.Limits{MaxInFlight: 2, Rate: 1000, Burst: 1000}})
	call := func(ctx context.Context, wait int) (int, error) { return rt29call(t, addr, token, ctx, wait) }
	waiters := func() int { return mcpserver.WaitersForTest(f.srv, dispatchID) }
	for i := range 6 {
		ctx, cancel := context.WithCancel(context.Background())
		type answer struct {
			code int
			err  error
		}
		got := make(chan answer, 1)
		go func() { code, err := call(ctx, 60); got <- answer{code, err} }()
		agoratest.WaitFor(t, 30*time.Second, "the server to hold the wait", func() bool { return len(got) > 0 || waiters() == 1 })
		cancel() // the client drops the connection
		switch a := <-got; {
		case a.err == nil && a.code == http.StatusTooManyRequests:
			t.Fatalf("drop %d: refused as too many in flight: the %d waits dropped before it still hold their requests", i, i)
		case a.err == nil:
			t.Fatalf("drop %d: the wait answered (%d) before the client dropped it", i, a.code)
		}
		agoratest.WaitFor(t, 20*time.Second, fmt.Sprintf("drop %d's wait to leave with its connection (one that stays lives on)", i),
			func() bool { return waiters() == 0 })
	}
	// The drops did not use up the client's in-flight requests.
	if code, err := call(context.Background(), 0); err != nil || code != http.StatusOK {
		t.Fatalf("a call after %d dropped waits: %d %v, want 200", 6, code, err)
	}
}

// rt29call posts one agora_dispatch_describe with wait_seconds on a connection of its own,
// closed when ctx ends, and returns the status and ctx's error when ctx ended first.
func rt29call(t *testing.T, addr, token string, ctx context.Context, wait int) (int, error) {
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"agora_dispatch_describe","arguments":{"id":"` + dispatchID + `","wait_seconds":` + strconv.Itoa(wait) + `}}}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	// A connection of its own, closed when ctx ends.
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	if ctx.Err() != nil {
		return resp.StatusCode, ctx.Err()
	}
	return resp.StatusCode, nil
}

// TestRedTeam29_RunQuestionNoteQuotesTheTask: describe's note on a
// run's attempt that asks a question names the answer command with a fan-out item's task id
// quoted for a shell.
func TestRedTeam29_RunQuestionNoteQuotesTheTask(t *testing.T) {
	f := newFixture()
	f.disp.get = func(_ context.Context, id string) (*mcpserver.Record, error) {
		r := record(id, "needs_input")
		r.RunID, r.TaskID = "r-1", "fan[a]"
		return r, nil
	}
	cs := f.stdio(t, mcpserver.Principal{Client: "lead", Ceiling: mcpserver.CeilingRead}, mcpserver.Limits{})
	var out loopOut
	decode(t, call(t, cs, "agora_dispatch_describe", map[string]any{"id": dispatchID}), &out)
	if !strings.Contains(out.Note, "agora orch answer r-1 'fan[a]' --answer TEXT") {
		t.Errorf("note %q, want the answer command with 'fan[a]' quoted", out.Note)
	}
}

// TestRedTeam29_ProgressTokenSpelledTwice: the HTTP split decides
// from the body whether a call carries a progress token (an event stream) or not (one JSON
// response), and the SDK decides again when it sends progress. Spellings on which the two
// could disagree (a second, differently cased key; an upper-case _META; a duplicate that
// ends null) must still answer a waiting describe, once, in its time, with no error.
func TestRedTeam29_ProgressTokenSpelledTwice(t *testing.T) {
	f := newFixture()
	f.disp.get = func(_ context.Context, id string) (*mcpserver.Record, error) { return record(id, "started"), nil }
	token := newToken(t)
	addr := f.http(t, mcpserver.HTTPConfig{Clients: clients(token), Limits: mcpserver.Limits{Rate: 1000, Burst: 1000}})
	for _, meta := range []string{
		`{"progressToken":"p1","ProgressToken":null}`,
		`{"ProgressToken":"p1","progressToken":null}`,
		`{"PROGRESSTOKEN":"p1"}`,
		`{"progressToken":"p1","progressToken":null}`,
		`{"progressToken":null,"progressToken":"p1"}`,
		`{"progress\u0054oken":"p1","progressToken":"p2"}`,
	} {
		for _, key := range []string{"_meta", "_META"} {
			body := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"` + key + `":` + meta + `,"name":"agora_dispatch_describe","arguments":{"id":"` + dispatchID + `","wait_seconds":1}}}`
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/mcp", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("MCP-Protocol-Version", "2025-11-25")
			start := time.Now()
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				cancel()
				t.Fatalf("%s %s: %v", key, meta, err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			cancel()
			got := string(b)
			if resp.StatusCode != http.StatusOK || strings.Count(got, `"id":9`) != 1 || !strings.Contains(got, `"result"`) || strings.Contains(got, `"isError":true`) {
				t.Errorf("%s %s: %d after %s:\n%.600s", key, meta, resp.StatusCode, time.Since(start), got)
			}
		}
	}
}

// TestRedTeam29_SDKClientCancelFreesItsRequest: the official SDK
// client over HTTP cancels a call by ending its request (its notifications/cancelled goes in a
// POST of its own, which a stateless server cannot match to the call). A lead that gives up
// on a describe wait must get its request back at once: with one request in flight allowed,
// the next call is served, not refused for a minute as too many in flight.
func TestRedTeam29_SDKClientCancelFreesItsRequest(t *testing.T) {
	f := newFixture()
	f.disp.get = func(_ context.Context, id string) (*mcpserver.Record, error) { return record(id, "started"), nil }
	token := newToken(t)
	addr := f.http(t, mcpserver.HTTPConfig{Clients: clients(token), Limits: mcpserver.Limits{MaxInFlight: 1, Rate: 1000, Burst: 1000}})
	cs := httpSession(t, "http://"+addr+"/mcp", token)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "agora_dispatch_describe", Arguments: map[string]any{"id": dispatchID, "wait_seconds": 60}})
		done <- err
	}()
	// The lead gives up once the server holds its wait.
	agoratest.WaitFor(t, 30*time.Second, "the server to hold the wait", func() bool { return mcpserver.WaitersForTest(f.srv, dispatchID) == 1 })
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the 60 s wait answered before the client gave up")
	}
	// Its wait leaves (the request ends with it), well inside the wait's 60 s.
	agoratest.WaitFor(t, 20*time.Second, "the given-up wait to leave", func() bool { return mcpserver.WaitersForTest(f.srv, dispatchID) == 0 })
	agoratest.Eventually(t, 5*time.Second, "the next call, with the given-up request freed", func() error {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "agora_dispatch_describe", Arguments: map[string]any{"id": dispatchID}})
		if err == nil && res.IsError {
			err = fmt.Errorf("refused: %s", text(res))
		}
		return err
	})
}
