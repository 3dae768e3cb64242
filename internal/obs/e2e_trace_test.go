package obs_test

import (
	"encoding/json"
	"net"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/tracing/otlprecv"
)

// callerTrace is the traceparent `agora orch submit` runs under (TRACEPARENT): the client
// sends it as the traceparent header, and the run joins that trace.
const (
	callerTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpanID  = "00f067aa0ba902b7"
)

// TestServe_TracesOfARun runs the metrics test's plan (five tasks, a lock, a task failing
// twice) through the real binary with OTEL_EXPORTER_OTLP_ENDPOINT at a receiver: serve
// exports the run and task spans, each detached supervisor its dispatch and phase spans,
// and the tree is whole: caller -> run -> task -> dispatch -> phases, one dispatch per
// attempt under its task. The trace id is on the run's and the dispatches' records, and the
// env bundle's secret (which the failing task prints) is in no export.
func TestServe_TracesOfARun(t *testing.T) {
	recv := otlprecv.Start(t)
	h := newHome(t, "OTEL_EXPORTER_OTLP_ENDPOINT="+recv.URL, "OTEL_BSP_SCHEDULE_DELAY=200", "OTEL_SERVICE_NAME=agora-e2e")
	s := h.serve()
	path := t.TempDir() + "/plan.yaml"
	write(t, path, obsPlan("traced"))
	out := h.runEnv([]string{"TRACEPARENT=00-" + callerTraceID + "-" + callerSpanID + "-01"}, "orch", "submit", path)
	runID := strings.TrimSpace(strings.Split(out, "\n")[0])
	run := h.waitRun(runID, 2*time.Minute)
	if run.State != lifecycle.RunFailed {
		t.Fatalf("run ended %s, want failed", run.State)
	}
	if run.TraceID != callerTraceID {
		t.Fatalf("orch status trace_id %q, want the caller's %s", run.TraceID, callerTraceID)
	}
	// Stop serve: its spans are flushed at shutdown (the supervisors flushed as they ended).
	s.cmd.Process.Signal(syscall.SIGTERM)
	s.cmd.Wait()

	runSpan, ok := recv.Wait("agora.run", 10*time.Second)
	if !ok {
		t.Fatal("no run span arrived")
	}
	if runSpan.TraceID != callerTraceID || runSpan.ParentID != callerSpanID || runSpan.Attrs["agora.run.id"] != runID ||
		runSpan.Resource["service.name"] != "agora-e2e" || !runSpan.StatusError {
		t.Fatalf("run span %+v: want the caller's child, the run id, the service name, an error status", runSpan)
	}
	tasks := map[string]otlprecv.Span{} // by span id
	byTask := map[string]string{}       // task id -> span id
	for _, s := range recv.Named("agora.task") {
		if s.ParentID != runSpan.SpanID {
			t.Errorf("task span %s is not under the run", s.Attrs["agora.task.id"])
		}
		tasks[s.SpanID], byTask[s.Attrs["agora.task.id"]] = s, s.SpanID
	}
	if len(tasks) != 5 {
		t.Fatalf("%d task spans, want 5 (a, b, c, d, f)", len(tasks))
	}
	if f := tasks[byTask["f"]]; f.Attrs["agora.task.attempts"] != "2" || !f.StatusError {
		t.Errorf("task f span %+v: want 2 attempts and an error", f)
	}
	// Every dispatch (6: f ran twice) under its task, with all its phases under it.
	deadline := time.Now().Add(10 * time.Second)
	for len(recv.Named("agora.dispatch")) < 6 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	dispatches := recv.Named("agora.dispatch")
	if len(dispatches) != 6 {
		t.Fatalf("%d dispatch spans, want 6", len(dispatches))
	}
	underF := 0
	for _, d := range dispatches {
		if _, ok := tasks[d.ParentID]; !ok {
			t.Errorf("dispatch span %s is under no task span", d.Attrs["agora.dispatch.id"])
		}
		if d.ParentID == byTask["f"] {
			underF++
		}
		phases := map[string]bool{}
		for _, s := range recv.Spans() {
			if s.ParentID == d.SpanID {
				phases[s.Name] = true
			}
		}
		for _, p := range []string{"accept", "staging", "sandbox", "agent", "capture", "reconcile"} {
			if !phases["agora.dispatch."+p] {
				t.Errorf("dispatch %s has no %s span (has %v)", d.Attrs["agora.dispatch.id"], p, phases)
			}
		}
		var rec struct {
			TraceID string `json:"trace_id"`
		}
		if err := json.Unmarshal([]byte(h.run("dispatch", "describe", d.Attrs["agora.dispatch.id"], "-o", "json")), &rec); err != nil {
			t.Fatal(err)
		}
		if rec.TraceID != callerTraceID {
			t.Errorf("dispatch %s record trace_id %q, want %s", d.Attrs["agora.dispatch.id"], rec.TraceID, callerTraceID)
		}
	}
	if underF != 2 {
		t.Errorf("%d dispatches under task f, want its 2 attempts", underF)
	}
	for _, s := range recv.Spans() {
		if s.TraceID != callerTraceID {
			t.Errorf("span %s is in trace %s", s.Name, s.TraceID)
		}
	}
	if recv.Contains(secretValue) {
		t.Error("an export holds the env bundle's secret")
	}
}

// TestServe_TracingOffConnectsNowhere: without an endpoint, a whole run through serve and
// the supervisors never reaches the OTLP default address (127.0.0.1:4318), where a receiver
// listens to notice.
func TestServe_TracingOffConnectsNowhere(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:4318")
	if err != nil {
		t.Skip("SKIP: 127.0.0.1:4318 (the OTLP/HTTP default) is in use, so a connection to it could not be told apart: " + err.Error())
	}
	recv := otlprecv.Serve(t, ln)
	h := newHome(t, "OTEL_SERVICE_NAME=agora-off", "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf")
	s := h.serve()
	path := t.TempDir() + "/plan.yaml"
	write(t, path, obsPlan("untraced"))
	run := h.waitRun(strings.TrimSpace(strings.Split(h.run("orch", "submit", path), "\n")[0]), 2*time.Minute)
	if run.TraceID != "" {
		t.Errorf("run trace_id %q with tracing off and no caller trace", run.TraceID)
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	s.cmd.Wait()
	if n := recv.Requests(); n != 0 {
		t.Fatalf("%d requests reached the OTLP default address with tracing off", n)
	}
}

// runEnv is run with extra environment.
func (h *home) runEnv(extra []string, args ...string) string {
	h.t.Helper()
	cmd := exec.Command(agoraBin, args...)
	cmd.Env = append(append([]string(nil), h.vars...), extra...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		h.t.Fatalf("agora %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
