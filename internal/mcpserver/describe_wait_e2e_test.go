package mcpserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestDescribeWait_OverStdioAndHTTP, with the real binary: a lead follows one
// dispatch past a single call's wait with agora_dispatch_describe and wait_seconds, over stdio
// and over HTTP, several callers at once on each. Each call returns when the dispatch moves
// (well before its wait), with progress notifications while it waits, until it ends; a describe
// of the ended dispatch with a wait answers at once. Before the fix describe refused any
// argument but id.
func TestDescribeWait_OverStdioAndHTTP(t *testing.T) {
	requireSandbox(t)
	home := newHome(t)
	agora(t, home, nil, "subagent", "register", "napper", "--capability", "shell", "--command", `sh -c 'sleep 4; echo done'`)
	token := newToken(t)
	srv := httpServer(t, home, []string{"AGORA_HTTP_TOKENS_FILE=" + tokensFile(t, map[string][2]string{"lead": {token, "dispatch"}})})
	var stdioProg, httpProg progressLog
	cmd := exec.Command(agoraBin, "mcp", "--ceiling", "dispatch")
	cmd.Env = baseEnv(home)
	stdio, err := mcp.NewClient(&mcp.Implementation{Name: "lead", Version: "1"}, &mcp.ClientOptions{ProgressNotificationHandler: stdioProg.handler}).
		Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdio.Close() })
	hc := &http.Client{Transport: bearer{token: token, next: http.DefaultTransport}}
	httpCS, err := mcp.NewClient(&mcp.Implementation{Name: "lead", Version: "1"}, &mcp.ClientOptions{ProgressNotificationHandler: httpProg.handler}).
		Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.url, HTTPClient: hc, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { httpCS.Close() })

	var started loopOut
	decode(t, call(t, stdio, "agora_dispatch", map[string]any{"subagent": "napper", "wait_seconds": 0}), &started)
	id := started.Dispatch.ID
	if started.Dispatch.Done {
		t.Fatalf("the napper ended at once: %+v", started.Dispatch)
	}

	const wait = 120
	var wg sync.WaitGroup
	for name, cs := range map[string]*mcp.ClientSession{"stdio": stdio, "http": httpCS} {
		for i := range 3 {
			wg.Go(func() {
				seen := started.Dispatch.State
				for calls := 0; ; calls++ {
					if calls == 5 {
						t.Errorf("%s waiter %d: not ended after 5 waits", name, i)
						return
					}
					params := &mcp.CallToolParams{Name: "agora_dispatch_describe", Arguments: map[string]any{"id": id, "wait_seconds": wait}}
					params.SetProgressToken(name + "-" + string(rune('a'+i)))
					start := time.Now()
					res, err := cs.CallTool(context.Background(), params)
					if err != nil {
						t.Errorf("%s waiter %d: %v", name, i, err)
						return
					}
					var out loopOut
					decode(t, res, &out)
					if took := time.Since(start); took >= wait/2*time.Second {
						t.Errorf("%s waiter %d: describe waited %s of %ds for a dispatch that moves within seconds", name, i, took, wait)
					}
					if out.Dispatch.Done {
						if out.Dispatch.State != "finished" {
							t.Errorf("%s waiter %d: ended %s: %+v", name, i, out.Dispatch.State, out.Dispatch)
						}
						return
					}
					if out.Dispatch.State == seen && out.Dispatch.Phase == "" {
						t.Errorf("%s waiter %d: a wait returned state %s unchanged before its end", name, i, seen)
					}
					seen = out.Dispatch.State
				}
			})
		}
	}
	wg.Wait()
	for name, p := range map[string]*progressLog{"stdio": &stdioProg, "http": &httpProg} {
		if msgs := p.all(); !strings.Contains(strings.Join(msgs, "\n"), "dispatch "+id+" ") {
			t.Errorf("%s: progress notifications while waiting: %q, want the dispatch's state", name, msgs)
		}
	}
	start := time.Now()
	var out loopOut
	decode(t, call(t, httpCS, "agora_dispatch_describe", map[string]any{"id": id, "wait_seconds": wait}), &out)
	if out.Dispatch.State != "finished" || time.Since(start) >= wait/2*time.Second {
		t.Errorf("describe of the ended dispatch with a wait: %s after %s", out.Dispatch.State, time.Since(start))
	}

	// The CLI: agora dispatch describe ID --wait DURATION, several at once.
	outJSON, stderr, code := agoraExit(t, home, "dispatch", "run", "--subagent", "napper", "--detach", "-o", "json")
	var cli dispatchRecord
	if err := json.Unmarshal([]byte(outJSON), &cli); err != nil || code != 0 {
		t.Fatalf("dispatch run --detach: exit %d %v\n%s\n%s", code, err, outJSON, stderr)
	}
	var cwg sync.WaitGroup
	for i := range 3 {
		cwg.Go(func() {
			seen := cli.State
			for calls := 0; calls < 5; calls++ {
				start := time.Now()
				out, stderr, code := agoraExit(t, home, "dispatch", "describe", cli.ID, "--wait", "2m", "-o", "json")
				var r dispatchRecord
				if err := json.Unmarshal([]byte(out), &r); err != nil || code != 0 {
					t.Errorf("cli waiter %d: exit %d %v\n%s", i, code, err, stderr)
					return
				}
				if took := time.Since(start); took >= time.Minute {
					t.Errorf("cli waiter %d: describe --wait 2m took %s for a dispatch that moves within seconds", i, took)
				}
				if r.State == "finished" {
					return
				}
				if r.State == seen {
					t.Errorf("cli waiter %d: --wait returned %s unchanged", i, r.State)
				}
				seen = r.State
			}
			t.Errorf("cli waiter %d: not finished after 5 waits", i)
		})
	}
	cwg.Wait()
	start = time.Now()
	if out, _, code := agoraExit(t, home, "dispatch", "describe", cli.ID, "--wait", "2m"); code != 0 || !strings.Contains(out, "state:     finished") || time.Since(start) >= time.Minute {
		t.Errorf("describe --wait of an ended dispatch: exit %d after %s: %s", code, time.Since(start), out)
	}
	if _, stderr, code := agoraExit(t, home, "dispatch", "describe", cli.ID, "--wait", "-1s"); code != 2 || !strings.Contains(stderr, "--wait") {
		t.Errorf("describe --wait -1s: exit %d %q, want a usage error (2)", code, stderr)
	}
}
