package tracing_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/agora-dev/agora/internal/tracing"
	"github.com/agora-dev/agora/internal/tracing/otlprecv"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestFromEnv_OffWithoutEndpoint(t *testing.T) {
	for _, vars := range []map[string]string{
		{},
		{"OTEL_SERVICE_NAME": "x", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_SDK_DISABLED": "true"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_TRACES_EXPORTER": "none"},
	} {
		tr, err := tracing.FromEnv(t.Context(), env(vars), nil)
		if err != nil {
			t.Fatalf("%v: %v", vars, err)
		}
		if tr.Enabled() {
			t.Fatalf("%v: tracing is on", vars)
		}
		ctx, end := tr.Start(t.Context(), "x", time.Time{})
		end(time.Time{}, "")
		if ctx != t.Context() {
			t.Fatal("an off tracer changed the context")
		}
		if a, b := tr.NewIDs(); a != "" || b != "" {
			t.Fatal("an off tracer made ids")
		}
	}
}

func TestCheck_Refusals(t *testing.T) {
	on := "http://127.0.0.1:4318"
	cases := []struct {
		vars map[string]string
		want string // "" = accepted
	}{
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": on}, ""},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": on + "/v1/traces", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, ""},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": on, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, "http/json"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": on, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "thrift"}, "thrift"},
		// the traces-specific variable wins
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": on, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, ""},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": on, "OTEL_TRACES_EXPORTER": "zipkin"}, "zipkin"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": on, "OTEL_TRACES_SAMPLER": "jaeger_remote"}, "jaeger_remote"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": on, "OTEL_TRACES_SAMPLER": "parentbased_traceidratio"}, ""},
		// off: nothing is read, nothing refused
		{map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, ""},
	}
	for _, c := range cases {
		err := tracing.Check(env(c.vars))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v refused: %v", c.vars, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%v: got %v, want a refusal naming %q", c.vars, err, c.want)
		}
	}
}

// A span tree with preset ids, a remote parent, the attribute allow-list and the flush on
// Shutdown, exported over OTLP/HTTP to a receiver; the exporter's header (a credential) is
// sent but is in no span.
func TestExport_HTTP(t *testing.T) {
	recv := otlprecv.Start(t)
	secret := "hdr-secret-4f1c9b2a77"
	vars := map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": recv.URL, "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer " + secret,
		"OTEL_SERVICE_NAME": "agora-test",
	}
	for k, v := range vars {
		t.Setenv(k, v)
	}
	tr, err := tracing.FromEnv(t.Context(), env(vars), nil)
	if err != nil {
		t.Fatal(err)
	}
	exportTree(t, tr, recv, secret)
	if len(recv.Headers()) == 0 || !strings.Contains(recv.Headers()[0].Get("Authorization"), secret) {
		t.Fatal("the exporter did not send OTEL_EXPORTER_OTLP_HEADERS")
	}
}

// The same over gRPC, to a gRPC receiver.
func TestExport_GRPC(t *testing.T) {
	recv := &otlprecv.Receiver{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	coltrace.RegisterTraceServiceServer(srv, grpcRecv{recv: recv})
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	vars := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://" + ln.Addr().String(), "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
	for k, v := range vars {
		t.Setenv(k, v)
	}
	tr, err := tracing.FromEnv(t.Context(), env(vars), nil)
	if err != nil {
		t.Fatal(err)
	}
	exportTree(t, tr, recv, "")
}

type grpcRecv struct {
	coltrace.UnimplementedTraceServiceServer
	recv *otlprecv.Receiver
}

func (g grpcRecv) Export(_ context.Context, req *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	raw, _ := proto.Marshal(req)
	g.recv.Add(raw, req)
	return &coltrace.ExportTraceServiceResponse{}, nil
}

func exportTree(t *testing.T, tr *tracing.Tracer, recv *otlprecv.Receiver, secret string) {
	t.Helper()
	if !tr.Enabled() {
		t.Fatal("tracing is off with an endpoint set")
	}
	traceID, runSpan := tracing.NewIDs()
	caller := tracing.Format("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", true)
	ctx := tr.WithIDs(tr.Join(t.Context(), caller), traceID, runSpan)
	ctx, endRun := tr.Start(ctx, "run", time.Now().Add(-time.Second), "agora.run.id", "r1", "agora.secret", "leak-"+secret, "agora.run.tasks", 3)
	cctx, endTask := tr.Start(ctx, "task", time.Time{}, "agora.task.id", "a", "agora.capabilities", []string{"git", "web"})
	if got := tr.Traceparent(cctx); !strings.HasPrefix(got, "00-0af7651916cd43dd8448eb211c80319c-") || strings.Contains(got, runSpan) {
		t.Fatalf("the task's traceparent %q is not its own span in the caller's trace", got)
	}
	endTask(time.Time{}, "failed", "agora.task.state", strings.Repeat("é", 300))
	endRun(time.Time{}, "")
	if err := tr.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	run, ok := recv.Wait("run", 5*time.Second)
	if !ok {
		t.Fatal("no run span arrived after Shutdown")
	}
	task, _ := recv.Wait("task", time.Second)
	// Under a remote parent the trace is the caller's; the preset span id is honoured.
	if run.TraceID != "0af7651916cd43dd8448eb211c80319c" || run.ParentID != "b7ad6b7169203331" || run.SpanID != runSpan {
		t.Fatalf("run span %+v: want the caller's trace, its parent and the preset span id %s", run, runSpan)
	}
	if task.ParentID != run.SpanID || task.TraceID != run.TraceID || task.SpanID == runSpan {
		t.Fatalf("task span %+v is not a child of run %s with an id of its own", task, run.SpanID)
	}
	if _, ok := run.Attrs["agora.secret"]; ok {
		t.Fatal("an attribute outside the allow-list was exported")
	}
	if run.Attrs["agora.run.id"] != "r1" || run.Attrs["agora.run.tasks"] != "3" || task.Attrs["agora.capabilities"] != "git,web" {
		t.Fatalf("attributes lost: %v %v", run.Attrs, task.Attrs)
	}
	if n := len(task.Attrs["agora.task.state"]); n > 256 || n == 0 {
		t.Fatalf("a long attribute is %d bytes, want clipped to 256", n)
	}
	if !task.StatusError || task.StatusMessage != "failed" {
		t.Fatalf("task status %v %q, want error failed", task.StatusError, task.StatusMessage)
	}
	if secret != "" && recv.Contains(secret) {
		t.Fatal("the exporter header's value is in an export")
	}
}

// With no parent, a preset trace id makes the root's trace: the run record names it before
// the span exists.
func TestPresetRoot(t *testing.T) {
	recv := otlprecv.Start(t)
	vars := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": recv.URL}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", recv.URL)
	tr, err := tracing.FromEnv(t.Context(), env(vars), nil)
	if err != nil {
		t.Fatal(err)
	}
	tid, sid := tr.NewIDs()
	ctx, end := tr.Start(tr.WithIDs(t.Context(), tid, sid), "root", time.Time{})
	_, endChild := tr.Start(ctx, "child", time.Time{})
	endChild(time.Time{}, "")
	end(time.Time{}, "")
	tr.Shutdown(t.Context())
	root, _ := recv.Wait("root", 5*time.Second)
	child, _ := recv.Wait("child", time.Second)
	if root.TraceID != tid || root.SpanID != sid || root.ParentID != "" {
		t.Fatalf("root %+v, want trace %s span %s", root, tid, sid)
	}
	if child.SpanID == sid || child.ParentID != sid {
		t.Fatalf("child %+v reused the preset id or lost its parent", child)
	}
}

func TestExtract(t *testing.T) {
	var got string
	h := tracing.Extract(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got = tracing.Traceparent(r.Context()) }))
	valid := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, c := range []struct{ header, want string }{
		{valid, valid},
		{"", ""},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", ""},    // no flags
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", ""}, // zero trace id
		{"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", ""}, // version ff is invalid
		{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", ""}, // upper case
		{strings.Repeat("a", 10000), ""},
	} {
		req := httptest.NewRequest("GET", "/", nil)
		if c.header != "" {
			req.Header.Set("traceparent", c.header)
		}
		got = "unset"
		h.ServeHTTP(httptest.NewRecorder(), req)
		if got != c.want {
			t.Errorf("traceparent %.60q: handler saw %q, want %q", c.header, got, c.want)
		}
	}
}

// The export error handler masks the exporter's header values.
func TestExportErrorsMasked(t *testing.T) {
	var buf bytes.Buffer
	secret := "tok-9d8e7f6a5b4c3d2e"
	vars := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "x-api-key=" + secret}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	tr, err := tracing.FromEnv(t.Context(), env(vars), slog.New(slog.NewTextHandler(&buf, nil)))
	if err != nil {
		t.Fatal(err)
	}
	tracing.HandleForTest(tr, "export to host failed: header x-api-key="+secret)
	if strings.Contains(buf.String(), secret) || !strings.Contains(buf.String(), "trace export") {
		t.Fatalf("log %q holds the header value or nothing", buf.String())
	}
	// An unreachable collector: spans are dropped, the command is not failed by it.
	_, end := tr.Start(t.Context(), "x", time.Time{})
	end(time.Time{}, "")
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	tr.Shutdown(ctx)
	if strings.Contains(buf.String(), secret) {
		t.Fatalf("log %q holds the header value", buf.String())
	}
}
