package dispatch_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/runtime/openairt/openaitest"
	"github.com/agora-dev/agora/internal/tracing"
	"github.com/agora-dev/agora/internal/tracing/otlprecv"
)

// TestTrace_DispatchModelAndToolSpans: a real openai dispatch in a real sandbox, under a
// caller's traceparent, exports its span tree to an OTLP receiver: dispatch under the
// caller, accept and each phase under the dispatch, every model call (GenAI conventions,
// tokens) under the agent phase, every tool decision under the model call that asked for it.
// The model key and an env bundle's secret are in no export; the record names the trace.
func TestTrace_DispatchModelAndToolSpans(t *testing.T) {
	e := newModelEnv(t)
	recv := otlprecv.Start(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", recv.URL)
	tr, err := tracing.FromEnv(t.Context(), func(k string) string { return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": recv.URL}[k] }, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.d.Tracer = tr
	const planted = "trace-planted-secret-5e2d8c1b9a7f"
	e.envBundle("creds", nil, map[string]string{"PLANTED": planted})
	e.capability("notes", "tools: [read_file, list_files]\noverlay: [\"notes/**\"]\n", map[string]string{"notes/hello.txt": "hello\n"})
	e.modelSubagent("reader", "openai", "notes")
	e.model(testAPIKey,
		openaitest.CallTool("list_files", `{"path":"notes"}`),
		openaitest.CallTool("read_file", `{"path":"notes/hello.txt"}`),
		openaitest.Func(func(openaitest.Request) openaitest.Reply { return openaitest.Reply{Content: "done"} }),
	)
	caller := "00-5bf92f3577b34da6a3ce929d0e0e4736-10f067aa0ba902b7-01"
	r := e.run(dispatch.Request{Subagent: "reader", Envs: []string{"model", "creds"}, Input: []byte(`{"prompt":"read it"}`), Traceparent: caller})
	wantFinished(t, r)
	if err := tr.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if r.TraceID != "5bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("record trace_id %q, want the caller's", r.TraceID)
	}
	d, ok := recv.Wait(dispatch.SpanDispatch, 5*time.Second)
	if !ok {
		t.Fatal("no dispatch span arrived")
	}
	if d.TraceID != r.TraceID || d.ParentID != "10f067aa0ba902b7" || d.Attrs["agora.dispatch.id"] != r.ID ||
		d.Attrs["agora.subagent"] != "reader" || d.Attrs["agora.capabilities"] != "notes" || d.Attrs["agora.dispatch.state"] != "finished" {
		t.Fatalf("dispatch span %+v", d)
	}
	var agent otlprecv.Span
	for _, name := range []string{"agora.dispatch.accept", "agora.dispatch.staging", "agora.dispatch.sandbox", "agora.dispatch.agent", "agora.dispatch.capture", "agora.dispatch.reconcile"} {
		got := recv.Named(name)
		if len(got) != 1 || got[0].ParentID != d.SpanID {
			t.Fatalf("%s: %d spans %+v, want one under the dispatch %s", name, len(got), got, d.SpanID)
		}
		if name == "agora.dispatch.agent" {
			agent = got[0]
		}
	}
	var chats []otlprecv.Span
	for _, s := range recv.Spans() {
		if strings.HasPrefix(s.Name, "chat") {
			chats = append(chats, s)
		}
	}
	if len(chats) != 3 {
		t.Fatalf("%d model call spans, want 3", len(chats))
	}
	chatIDs := map[string]bool{}
	for _, c := range chats {
		chatIDs[c.SpanID] = true
		if c.ParentID != agent.SpanID || c.Attrs["gen_ai.operation.name"] != "chat" || c.Attrs["gen_ai.provider.name"] != "openai" ||
			c.Attrs["gen_ai.usage.input_tokens"] == "" || c.Attrs["gen_ai.usage.output_tokens"] == "" || c.Attrs["agora.decision"] != "allowed" {
			t.Errorf("model call span %+v: want a GenAI chat span with tokens under the agent phase %s", c, agent.SpanID)
		}
	}
	var tools []string
	for _, s := range recv.Spans() {
		if strings.HasPrefix(s.Name, "execute_tool") {
			tools = append(tools, s.Attrs["gen_ai.tool.name"]+" "+s.Attrs["agora.tool.decision"])
			if !chatIDs[s.ParentID] {
				t.Errorf("tool span %+v is not under a model call", s)
			}
		}
	}
	if strings.Join(tools, ",") != "list_files allowed,read_file allowed" {
		t.Errorf("tool spans %v, want list_files and read_file allowed", tools)
	}
	for _, s := range recv.Spans() {
		if s.TraceID != r.TraceID {
			t.Errorf("span %s is in trace %s, not the dispatch's", s.Name, s.TraceID)
		}
	}
	for _, secret := range []string{planted, testAPIKey, "read it", "hello\n"} {
		if recv.Contains(secret) {
			t.Errorf("an export holds %q", secret)
		}
	}
}
