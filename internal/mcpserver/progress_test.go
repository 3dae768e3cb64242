package mcpserver_test

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agora-dev/agora/internal/mcpserver"
)

// slowWatch answers Watch after wait, just past a tick of the watch's progress.
type slowWatch struct {
	fakeOrchestrator
	wait time.Duration
}

func (o *slowWatch) Watch(ctx context.Context, _ string, _ time.Duration) (json.RawMessage, error) {
	select {
	case <-time.After(o.wait):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return json.RawMessage(`{"id":"run-1","state":"done"}`), nil
}

// TestWatchProgress_EndsWithTheState: while agora_orchestrator_watch waits, a client that sent
// a progress token hears that it waits; the last notification is the state the run ended in,
// and none comes after the answer. Server and client run in a synctest bubble over pipes: the
// watch's ticks and its wait pass on the bubble's fake clock.
func TestWatchProgress_EndsWithTheState(t *testing.T) {
	synctest.Test(t, testWatchProgressEndsWithTheState)
}

func testWatchProgressEndsWithTheState(t *testing.T) {
	f := newFixture()
	f.orch = &slowWatch{wait: 2050 * time.Millisecond}
	s := f.server(t)
	sr, cw := io.Pipe()
	cr, sw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- s.ServeStdio(ctx, sr, sw, mcpserver.StdioConfig{Principal: mcpserver.Principal{Client: "tester", Ceiling: mcpserver.CeilingRead}})
		sw.Close()
	}()
	var mu sync.Mutex
	var got []string
	client := mcp.NewClient(&mcp.Implementation{Name: "watcher", Version: "v0"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, req.Params.Message)
		},
	})
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: cr, Writer: cw}, nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	defer func() {
		cs.Close()
		cancel()
		<-done
	}()
	params := &mcp.CallToolParams{Name: "agora_orchestrator_watch", Arguments: map[string]any{"run_id": "run-1"}}
	params.SetProgressToken("watch-1")
	res, err := cs.CallTool(ctx, params)
	if err != nil || res.IsError {
		t.Fatalf("watch: %v %+v", err, res)
	}
	synctest.Wait()
	time.Sleep(f.orch.(*slowWatch).wait) // as long again: past the next tick the watch would have had
	synctest.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(got) < 3 || !strings.Contains(strings.Join(got, "\n"), "waiting for a change") || !strings.HasPrefix(got[len(got)-1], "run run-1: done,") {
		t.Errorf("progress = %q, want a start, a wait and the final state last", got)
	}
}
