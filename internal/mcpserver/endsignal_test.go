package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agora-dev/agora/internal/mcpserver"
)

// TestEndSignal_AnswersAtTheEndNotAtAPoll (an MCP agora_dispatch of a no-op answered at
// the first 50 ms poll after its end): with the polls held off for an hour, agora_dispatch
// still answers with the finished record as soon as the dispatcher's end signal closes; a
// signal of another dispatch, or none, leaves the call to its wait (the control: the record
// is finished all along there, so only a read could have found it). A signal that closes
// while the record is not final yet (handed on) does not end the wait either.
func TestEndSignal_AnswersAtTheEndNotAtAPoll(t *testing.T) {
	mcpserver.SetPollForTest(t, time.Hour, time.Hour)
	type answer struct {
		state string
		err   error
	}
	run := func(t *testing.T, signal func(id string) <-chan struct{}, finished *atomic.Bool, wait int, during func()) answer {
		fx := newFixture()
		called := make(chan struct{})
		fx.disp.dispatch = func(context.Context, mcpserver.DispatchRequest) (*mcpserver.Record, error) {
			close(called)
			return record(dispatchID, "started"), nil
		}
		fx.disp.get = func(_ context.Context, id string) (*mcpserver.Record, error) {
			if finished.Load() {
				return record(id, "finished"), nil
			}
			return record(id, "started"), nil
		}
		fx.disp.ended = signal
		cs := fx.stdio(t, mcpserver.Principal{Client: "lead", Ceiling: mcpserver.CeilingDispatch}, mcpserver.Limits{Rate: 1000, Burst: 1000})
		got := make(chan answer, 1)
		go func() {
			var out loopOut
			res, err := callErr(cs, "agora_dispatch", map[string]any{"subagent": "writer", "wait_seconds": wait})
			if err == nil {
				err = decodeErr(res, &out)
			}
			got <- answer{out.Dispatch.State, err}
		}()
		<-called
		during()
		return <-got
	}

	t.Run("the signal wakes the poll", func(t *testing.T) {
		var finished atomic.Bool
		sig := make(chan struct{})
		a := run(t, func(id string) <-chan struct{} {
			if id != dispatchID {
				return nil
			}
			return sig
		}, &finished, 60, func() {
			time.Sleep(50 * time.Millisecond) // the call waits on its feed
			finished.Store(true)
			close(sig)
		})
		if a.err != nil || a.state != "finished" {
			t.Fatalf("agora_dispatch with the end signalled = %q, %v; want finished before its 60 s wait", a.state, a.err)
		}
	})
	t.Run("no signal: the wait, not a read", func(t *testing.T) {
		var finished atomic.Bool
		finished.Store(true)
		a := run(t, func(string) <-chan struct{} { return nil }, &finished, 1, func() {})
		if a.err != nil || a.state != "started" {
			t.Fatalf("agora_dispatch with polls held off and no signal = %q, %v; want started after its 1 s wait (the control)", a.state, a.err)
		}
	})
	t.Run("a signal before the record is final: the wait goes on", func(t *testing.T) {
		var finished atomic.Bool
		sig := make(chan struct{})
		close(sig)
		a := run(t, func(string) <-chan struct{} { return sig }, &finished, 1, func() {})
		if a.err != nil || a.state != "started" {
			t.Fatalf("agora_dispatch signalled while still started = %q, %v; want started after its wait", a.state, a.err)
		}
	})
}

// callErr is call for a goroutine: it returns the error instead of failing the test.
func callErr(cs *mcp.ClientSession, name string, args any) (*mcp.CallToolResult, error) {
	return cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
}

// decodeErr is decode for a goroutine.
func decodeErr(res *mcp.CallToolResult, v any) error {
	if res.IsError {
		return fmt.Errorf("tool error: %s", text(res))
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
