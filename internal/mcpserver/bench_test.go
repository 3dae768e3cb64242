package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agora-dev/agora/internal/compute/local"
)

// benchClients is how many clients call at once in BenchmarkDescribeHTTP.
const benchClients = 8

// BenchmarkDescribeHTTP: agora_dispatch_describe against the real binary over HTTP on
// loopback, from 8 clients (each with its own token) calling at once. Every call goes the
// whole way: Host, Origin and token checks, the rate limiter (raised out of the way), a
// stateless MCP exchange, the ceiling check, one audit entry committed to agora.db, and the
// record. Targets: at least 3,000 calls/s and p99 at most 10 ms on 2 cores.
//
// The load generator shares the machine with the server, so there are two: "raw" sends the
// JSON-RPC request as any HTTP client would (as little client CPU as possible: it measures the
// server), "sdk" uses the official Go SDK client. CPU per call is reported for each side.
func BenchmarkDescribeHTTP(b *testing.B) {
	home := newHome(b)
	id := deniedDispatch(b, home)
	var file strings.Builder
	tokens := make([]string, benchClients)
	for i := range tokens {
		tokens[i] = newToken(b)
		fmt.Fprintf(&file, "- {name: bench-%d, token: %s, ceiling: read}\n", i, tokens[i])
	}
	path := filepath.Join(b.TempDir(), "tokens.yaml")
	if err := os.WriteFile(path, []byte(file.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	srv := httpServer(b, home, []string{"AGORA_HTTP_TOKENS_FILE=" + path}, "--rate", "1000000", "--burst", "1000000")

	raw := func(b *testing.B, id string) {
		body := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"agora_dispatch_describe","arguments":{"id":"` + id + `"}}}`)
		tr := &http.Transport{MaxIdleConnsPerHost: benchClients}
		defer tr.CloseIdleConnections()
		callers := make([]func() error, benchClients)
		for i := range callers {
			hc := &http.Client{Transport: tr}
			var buf bytes.Buffer // kept: reading a 150 KB answer into a new buffer each call is client CPU
			callers[i] = func() error {
				req, _ := http.NewRequest(http.MethodPost, srv.url, bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+tokens[i])
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
				resp, err := hc.Do(req)
				if err != nil {
					return err
				}
				buf.Reset()
				_, err = buf.ReadFrom(resp.Body)
				resp.Body.Close()
				out := buf.Bytes()
				if err != nil || resp.StatusCode != http.StatusOK || !bytes.Contains(out, []byte(`"result"`)) ||
					bytes.Contains(out, []byte(`"isError":true`)) || !bytes.Contains(out, []byte(id)) {
					return fmt.Errorf("describe: %d %s %v", resp.StatusCode, out, err)
				}
				return nil
			}
		}
		benchCalls(b, srv, callers)
	}
	// A dispatch that has ended never changes again, so the server keeps its record in
	// memory; a live one is read from agora.db on every call.
	b.Run("raw", func(b *testing.B) { raw(b, id) })
	b.Run("raw-live", func(b *testing.B) {
		if err := local.Available(); err != nil {
			b.Skipf("SKIP: a live dispatch needs the bubblewrap sandbox: %v", err)
		}
		cs := stdioSession(b, home)
		var out dispatchOut
		decode(b, call(b, cs, "agora_dispatch", map[string]any{"subagent": "sleeper", "wait_seconds": 1}), &out)
		if out.Dispatch.State != "started" {
			b.Fatalf("sleeper = %+v", out.Dispatch)
		}
		defer call(b, cs, "agora_dispatch_cancel", map[string]any{"id": out.Dispatch.ID})
		raw(b, out.Dispatch.ID)
	})
	// The target: describe returning a 64 KiB patch inline (with its diffstat, the
	// logs' tails and the outputs): at least 2,000 calls/s and p99 at most 15 ms.
	b.Run("raw-patch64k", func(b *testing.B) {
		if err := local.Available(); err != nil {
			b.Skipf("SKIP: a dispatch with a patch needs the bubblewrap sandbox: %v", err)
		}
		agora(b, home, nil, "subagent", "register", "big", "--capability", "shell", "--command",
			`sh -c 'i=0; while [ $i -lt 1080 ]; do echo "line $i of a patch that is sixty-four kilobytes long......"; i=$((i+1)); done > big.txt'`)
		var out struct {
			Dispatch struct{ ID, State string }
			Results  struct {
				Patch struct {
					Size      int64
					Truncated bool
				}
			}
		}
		decode(b, call(b, stdioSession(b, home), "agora_dispatch", map[string]any{"subagent": "big", "wait_seconds": 120}), &out)
		if out.Dispatch.State != "finished" || out.Results.Patch.Size < 60<<10 || out.Results.Patch.Size > 72<<10 {
			b.Fatalf("big = %+v", out)
		}
		raw(b, out.Dispatch.ID)
	})
	// sdk: eight clients as eight processes would be, each with its own connection pool,
	// speaking the SDK's newest protocol version (2026-07-28 with SDK v1.8.0: every request
	// carries its client's capabilities in _meta, which the SDK's server decodes several times).
	// sdk-2025-11-25: the same clients pinned to protocol version 2025-11-25, to tell what the
	// protocol costs from what agora does.
	// sdk-one-pool: the same eight sharing http.DefaultTransport, which keeps two idle
	// connections per host, so most calls open a new connection (~470 new connections a
	// second).
	sdkCallers := func(b *testing.B, srv *server, transport func() http.RoundTripper, version string) []func() error {
		params := &mcp.CallToolParams{Name: "agora_dispatch_describe", Arguments: map[string]any{"id": id}}
		var opts *mcp.ClientSessionOptions
		if version != "" {
			opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
		}
		callers := make([]func() error, benchClients)
		for i := range callers {
			cs := httpSessionVia(b, srv.url, tokens[i], transport(), opts)
			if got := cs.InitializeResult().ProtocolVersion; version != "" && got != version {
				b.Fatalf("negotiated protocol %q, want %q", got, version)
			}
			callers[i] = func() error {
				res, err := cs.CallTool(context.Background(), params)
				if err != nil || res.IsError {
					return fmt.Errorf("describe: %v %v", err, res)
				}
				return nil
			}
		}
		return callers
	}
	sdk := func(b *testing.B, srv *server, transport func() http.RoundTripper, version string) {
		benchCalls(b, srv, sdkCallers(b, srv, transport, version))
	}
	ownPool := func(b *testing.B) func() http.RoundTripper {
		return func() http.RoundTripper {
			tr := &http.Transport{}
			b.Cleanup(tr.CloseIdleConnections)
			return tr
		}
	}
	b.Run("sdk", func(b *testing.B) { sdk(b, srv, ownPool(b), "") })
	b.Run("sdk-2025-11-25", func(b *testing.B) { sdk(b, srv, ownPool(b), "2025-11-25") })
	b.Run("sdk-one-pool", func(b *testing.B) {
		sdk(b, srv, func() http.RoundTripper { return http.DefaultTransport }, "")
	})
	// bareAnswer is agora's answer as the SDK client decoded it, for the bare server to send.
	bareAnswer := func(b *testing.B) json.RawMessage {
		res, err := httpSessionVia(b, srv.url, tokens[0], http.DefaultTransport, nil).CallTool(b.Context(), &mcp.CallToolParams{Name: "agora_dispatch_describe", Arguments: map[string]any{"id": id}})
		if err != nil || res.IsError || res.StructuredContent == nil {
			b.Fatalf("describe: %v %+v", err, res)
		}
		answer, err := json.Marshal(res.StructuredContent)
		if err != nil {
			b.Fatal(err)
		}
		return answer
	}
	// sdk-only: the same clients against a bare SDK server process (serveSDKOnly) returning
	// agora's answer (its fields and values, re-encoded from what the client decoded, keys
	// sorted): the SDK's own cost on both sides of the wire on this machine, under
	// which no server built on it can answer.
	b.Run("sdk-only", func(b *testing.B) { sdk(b, sdkOnlyProcess(b, bareAnswer(b)), ownPool(b), "") })
	// sdk-interleaved: sdk and sdk-only at once, in turns (interleave), so that the machine's
	// changes of speed fall on both alike: the ratio docs/BENCHMARKS.md gives for describe.
	b.Run("sdk-interleaved", func(b *testing.B) {
		bare := sdkOnlyProcess(b, bareAnswer(b))
		interleave(b,
			&side{name: "agora", srv: srv, callers: sdkCallers(b, srv, ownPool(b), "")},
			&side{name: "bare", srv: bare, callers: sdkCallers(b, bare, ownPool(b), "")})
	})
}

// benchCalls runs b.N calls spread over the callers, one goroutine each, and reports
// throughput, latency percentiles and CPU per call on both sides.
func benchCalls(b *testing.B, srv *server, callers []func() error) {
	for _, c := range callers { // warm up: connections, caches
		if err := c(); err != nil {
			b.Fatal(err)
		}
	}
	work := make(chan struct{})
	lat := make([][]time.Duration, len(callers))
	var wg sync.WaitGroup
	var failed sync.Once
	for i, c := range callers {
		wg.Go(func() {
			for range work {
				t0 := time.Now()
				err := c()
				lat[i] = append(lat[i], time.Since(t0))
				if err != nil {
					failed.Do(func() { b.Error(err) })
				}
			}
		})
	}
	serverCPU, clientCPU := procCPU(b, srv.pid), selfCPU()
	start := time.Now()
	for b.Loop() {
		work <- struct{}{}
	}
	close(work)
	wg.Wait()
	elapsed := time.Since(start)
	all := slices.Concat(lat...)
	n := float64(len(all))
	b.ReportMetric(n/elapsed.Seconds(), "calls/s")
	b.ReportMetric(ms(percentile(all, 0.50)), "p50-ms")
	b.ReportMetric(ms(percentile(all, 0.99)), "p99-ms")
	b.ReportMetric(float64((procCPU(b, srv.pid)-serverCPU).Microseconds())/n, "server-cpu-us/call")
	b.ReportMetric(float64((selfCPU()-clientCPU).Microseconds())/n, "client-cpu-us/call")
}

// BenchmarkListToolsStdio: one tools/list round trip with the real binary over stdio.
// Target: median at most 1 ms.
func BenchmarkListToolsStdio(b *testing.B) {
	cs := stdioSession(b, newHome(b))
	var lat []time.Duration
	for b.Loop() {
		t0 := time.Now()
		res, err := cs.ListTools(b.Context(), nil)
		lat = append(lat, time.Since(t0))
		if err != nil || len(res.Tools) != 9 {
			b.Fatalf("tools/list: %v", err)
		}
	}
	b.ReportMetric(ms(percentile(lat, 0.50)), "median-ms")
	b.ReportMetric(ms(percentile(lat, 0.99)), "p99-ms")
}

// deniedDispatch records a dispatch through the real binary without needing a sandbox: the
// catalog denies rogue's command, so the record ends at once.
func deniedDispatch(tb testing.TB, home string) string {
	tb.Helper()
	var out dispatchOut
	decode(tb, call(tb, stdioSession(tb, home), "agora_dispatch", map[string]any{"subagent": "rogue"}), &out)
	if out.Dispatch.Reason != "denied" {
		tb.Fatalf("rogue = %+v", out.Dispatch)
	}
	return out.Dispatch.ID
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(math.Ceil(p*float64(len(s))))-1]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// procCPU is the user+system CPU time process pid has used.
func procCPU(tb testing.TB, pid int) time.Duration {
	tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // in USER_HZ ticks
}

// selfCPU is the user+system CPU time this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
