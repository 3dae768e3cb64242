package codexadapter

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/runtime/codexrt/responsestest"
)

// BenchmarkCodexGate measures what the codex relay's gate adds to each model event: the same
// event stream read through the gate (each event framed, decoded exactly with strictjson and
// every call judged by the grant, as codexAudit.precheck does) and read as the relay reads it
// without one (a plain copy). Streams: "call" is the Responses fake's answer calling
// exec_command (10 events, as the API streams a call); "text" is 500 text deltas, the bulk of
// a real answer. It reports ns and bytes per event.
func BenchmarkCodexGate(b *testing.B) {
	fake, err := responsestest.Start("", responsestest.Turns(responsestest.Exec("git status")))
	if err != nil {
		b.Fatal(err)
	}
	defer fake.Close()
	resp, err := http.Post(fake.URL+"/responses", "application/json", strings.NewReader(`{"model":"gpt-5.5","stream":true,"input":"go"}`))
	if err != nil {
		b.Fatal(err)
	}
	call, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		b.Fatal(err)
	}
	var text bytes.Buffer
	for i := range 500 {
		fmt.Fprintf(&text, "event: response.output_text.delta\ndata: {\"content_index\":0,\"delta\":\" tok%d\",\"item_id\":\"msg_68f0\",\"logprobs\":[],\"obfuscation\":\"k2Xq\",\"output_index\":1,\"sequence_number\":%d,\"type\":\"response.output_text.delta\"}\n\n", i, i+4)
	}
	audit := &codexAudit{shell: "/usr/bin/bash", seen: map[string]bool{},
		grants: grant.Set{Tools: []string{"run_command"}, Commands: []string{"git status"}}}
	for _, stream := range []struct {
		name string
		data []byte
	}{{"call", call}, {"text", text.Bytes()}} {
		events := bytes.Count(stream.data, []byte("\n\n"))
		run := func(b *testing.B, read func(io.Reader) io.Reader) {
			b.SetBytes(int64(len(stream.data)))
			b.ReportAllocs()
			for b.Loop() {
				n, err := io.Copy(io.Discard, read(bytes.NewReader(stream.data)))
				if err != nil || n != int64(len(stream.data)) {
					b.Fatalf("read %d of %d bytes: %v", n, len(stream.data), err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*events), "ns/event")
		}
		b.Run("stream="+stream.name+"/relay=plain", func(b *testing.B) {
			run(b, func(r io.Reader) io.Reader { return bufio.NewReaderSize(r, 64<<10) })
		})
		b.Run("stream="+stream.name+"/relay=gate", func(b *testing.B) {
			run(b, func(r io.Reader) io.Reader {
				return &callGate{src: bufio.NewReaderSize(r, 64<<10), body: io.NopCloser(nil), judge: audit.precheck}
			})
		})
	}
}
