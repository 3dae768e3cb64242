package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/agora-dev/agora/internal/mcpserver"
)

// BenchmarkDescribeFloor splits describe's cost with a 64 KiB patch in two, in process, over
// HTTP on loopback, with 8 callers at once (the client shares the CPU, so the figures are for
// both sides):
//
//   - agora: the whole server (guard, audit port, results, the encoded answer kept) over fake
//     ports, describing a finished dispatch whose 64 KiB patch comes back inline;
//   - sdk-only: a bare SDK server, configured as agora's (stateless, JSON responses), whose one
//     tool returns that same answer already encoded: what the SDK costs to send it;
//   - agora-no-patch and sdk-only-no-patch: the same without a patch.
//
// When agora is close to sdk-only, the time goes to the SDK putting the answer on the wire.
func BenchmarkDescribeFloor(b *testing.B) {
	var patch bytes.Buffer
	patch.WriteString("diff --git a/big.txt b/big.txt\nnew file mode 100644\nindex 0000000..1111111\n--- /dev/null\n+++ b/big.txt\n@@ -0,0 +1,1080 @@\n")
	for i := range 1080 {
		fmt.Fprintf(&patch, "+line %d of a patch that is sixty-four kilobytes long......\n", i)
	}
	for _, withPatch := range []bool{false, true} {
		suffix := "-no-patch"
		if withPatch {
			suffix = ""
		}
		f := newFixture()
		r := record(resID, "finished")
		f.disp.content = map[string][]byte{"sha256:out": []byte("done\n")}
		r.Stdout = &mcpserver.Artifact{Digest: "sha256:out", Size: 5}
		if withPatch {
			f.disp.content["sha256:patch"] = patch.Bytes()
			r.Patch = &mcpserver.Artifact{Digest: "sha256:patch", Size: int64(patch.Len())}
		}
		f.disp.get = func(context.Context, string) (*mcpserver.Record, error) { return r, nil }
		tok := newToken(b)
		addr := f.http(b, mcpserver.HTTPConfig{
			Clients: []mcpserver.Client{{Name: "bench", Token: tok, Ceiling: mcpserver.CeilingRead}},
			Limits:  mcpserver.Limits{Rate: 1e9, Burst: 1 << 30, MaxInFlight: 64},
		})
		agoraURL := "http://" + addr + "/mcp"
		// The answer agora sends, as the bare SDK server will send it.
		answer := describeOnce(b, agoraURL, tok)
		sdkURL := sdkOnlyServer(b, answer)
		b.Run("agora"+suffix, func(b *testing.B) { postParallel(b, agoraURL, tok, len(answer)) })
		b.Run("sdk-only"+suffix, func(b *testing.B) { postParallel(b, sdkURL, "", len(answer)) })
	}
}

const describeCall = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"agora_dispatch_describe","arguments":{"id":"` + resID + `"}}}`

// postDescribe sends one describe call and returns the response body.
func postDescribe(hc *http.Client, url, token string) ([]byte, error) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader([]byte(describeCall)))
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err == nil && (resp.StatusCode != http.StatusOK || bytes.Contains(out, []byte(`"isError":true`))) {
		err = fmt.Errorf("describe: %d %.300s", resp.StatusCode, out)
	}
	return out, err
}

// describeOnce is agora's structured answer to one describe.
func describeOnce(tb testing.TB, url, token string) json.RawMessage {
	tb.Helper()
	out, err := postDescribe(http.DefaultClient, url, token)
	if err != nil {
		tb.Fatal(err)
	}
	var msg struct {
		Result struct {
			StructuredContent json.RawMessage `json:"structuredContent"`
		} `json:"result"`
	}
	if err := json.Unmarshal(out, &msg); err != nil || len(msg.Result.StructuredContent) == 0 {
		tb.Fatalf("describe answer %.300s: %v", out, err)
	}
	return msg.Result.StructuredContent
}

// sdkOnlyServer serves [sdkOnlyHandler] with answer in this process.
func sdkOnlyServer(tb testing.TB, answer json.RawMessage) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := &http.Server{Handler: sdkOnlyHandler(answer)}
	go srv.Serve(ln)
	tb.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String() + "/mcp"
}

// postParallel runs b.N describe calls from benchClients callers at once.
func postParallel(b *testing.B, url, token string, answerLen int) {
	tr := &http.Transport{MaxIdleConnsPerHost: benchClients}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	var bytesIn atomic.Int64
	b.SetParallelism(max(1, benchClients/runtime.GOMAXPROCS(0)))
	b.ReportAllocs()
	b.ResetTimer()
	cpu := selfCPU()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			out, err := postDescribe(hc, url, token)
			if err != nil {
				b.Error(err)
				return
			}
			bytesIn.Add(int64(len(out)))
		}
	})
	b.StopTimer()
	if b.N > 0 {
		// CPU time, both sides: steadier than wall time on a shared machine.
		b.ReportMetric(float64((selfCPU()-cpu).Microseconds())/float64(b.N), "cpu-us/op")
		b.ReportMetric(float64(bytesIn.Load())/float64(b.N), "resp-bytes/op")
		b.ReportMetric(float64(answerLen), "answer-bytes")
	}
}
