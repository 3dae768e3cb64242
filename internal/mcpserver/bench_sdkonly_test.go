package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sdkOnlyEnv names the answer file when this test binary runs as the bare SDK server of
// BenchmarkDescribeHTTP/sdk-only (see serveSDKOnly).
const sdkOnlyEnv = "AGORA_BENCH_SDK_ONLY_ANSWER"

// serveSDKOnly is this test binary as a process of its own serving one tool,
// agora_dispatch_describe, that returns the answer in the named file as agora does
// (structured content and the same JSON as text), through the SDK alone, configured as
// agora's server is (stateless, JSON responses, GOGC 400 as `agora mcp` sets it): the floor
// under describe with the SDK on both sides of the wire on this machine. It prints the
// address as `agora mcp --http` does and serves until interrupted.
func serveSDKOnly(answerFile string) int {
	answer, err := os.ReadFile(answerFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	debug.SetGCPercent(400)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	srv := &http.Server{Handler: sdkOnlyHandler(answer)}
	go func() {
		c := make(chan os.Signal, 1)
		signal.Notify(c, os.Interrupt)
		<-c
		srv.Close()
	}()
	line, _ := json.Marshal(map[string]string{"msg": "mcp server listening", "addr": ln.Addr().String()})
	fmt.Fprintf(os.Stderr, "%s\n", line)
	srv.Serve(ln)
	return 0
}

// sdkOnlyHandler is the bare SDK server of serveSDKOnly and BenchmarkDescribeFloor.
func sdkOnlyHandler(answer json.RawMessage) http.Handler {
	s := mcp.NewServer(&mcp.Implementation{Name: "sdk-only", Version: "v0"}, nil)
	s.AddTool(&mcp.Tool{Name: "agora_dispatch_describe", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{
				StructuredContent: answer,
				Content:           []mcp.Content{&mcp.TextContent{Text: string(answer)}},
			}, nil
		})
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
}

// sdkOnlyProcess starts this test binary as serveSDKOnly with answer, and stops it when tb
// ends.
func sdkOnlyProcess(tb testing.TB, answer json.RawMessage) *server {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "answer.json")
	if err := os.WriteFile(path, answer, 0o600); err != nil {
		tb.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	return startServer(tb, exec.Command(self, "-test.run=^$"), []string{sdkOnlyEnv + "=" + path})
}
