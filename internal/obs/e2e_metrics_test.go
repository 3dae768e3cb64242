package obs_test

import (
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/api"
)

// TestServe_MetricsMatchTheRun runs a real plan through the real binary (five tasks, a lock
// two of them contend for, one task failing twice) and parses /metrics with Prometheus' own
// text parser: the counters must tell the run's story exactly, and neither /metrics nor the
// log may hold the env bundle's secret that the failing task printed.
func TestServe_MetricsMatchTheRun(t *testing.T) {
	h := newHome(t)
	s := h.serve()
	run := h.submitAndWait(obsPlan("metrics"), 2*time.Minute)
	if run.State != lifecycle.RunFailed {
		t.Fatalf("run ended %s, want failed (task f fails): %v", run.State, run.Counts)
	}

	code, body := s.get(t, "/metrics")
	if code != 200 {
		t.Fatalf("/metrics answered %d", code)
	}
	fams := parseMetrics(t, body)
	want := []struct {
		name   string
		labels map[string]string
		value  float64
	}{
		{"agora_orch_runs_ended_total", map[string]string{"state": "failed"}, 1},
		{"agora_orch_attempts_ended_total", map[string]string{"state": "succeeded", "reason": "none"}, 4},
		{"agora_orch_attempts_ended_total", map[string]string{"state": "failed", "reason": "worker-failed"}, 2},
		{"agora_orch_transitions_total", map[string]string{"kind": "task.fired"}, 6},
		{"agora_orch_transitions_total", map[string]string{"kind": "task.retry_scheduled"}, 1},
		{"agora_orch_transitions_total", map[string]string{"kind": "task.failed"}, 1},
		{"agora_orch_transitions_total", map[string]string{"kind": "run.submitted"}, 1},
		{"agora_dispatches_started_total", map[string]string{"target": "local"}, 6},
		{"agora_dispatches_ended_total", map[string]string{"state": "finished", "reason": "none"}, 4},
		{"agora_dispatches_ended_total", map[string]string{"state": "failed", "reason": "worker-failed"}, 2},
		{"agora_dispatch_startup_seconds", nil, 6}, // a histogram: its count
		{"agora_orch_engine_up", nil, 1},
		{"agora_orch_live_attempts", nil, 0},
		{"agora_orch_tasks", map[string]string{"state": "succeeded"}, 4},
		{"agora_orch_tasks", map[string]string{"state": "failed"}, 1},
		{"agora_orch_runs", map[string]string{"state": "failed"}, 1},
	}
	for _, w := range want {
		got, ok := value(fams, w.name, w.labels)
		if !ok {
			t.Errorf("%s%v: missing", w.name, w.labels)
			continue
		}
		if got != w.value {
			t.Errorf("%s%v = %v, want %v", w.name, w.labels, got, w.value)
		}
	}
	if got, _ := value(fams, "agora_orch_lock_waits_total", nil); got < 1 {
		t.Errorf("agora_orch_lock_waits_total = %v; c and d contend for pool, one must have waited", got)
	}
	if got, _ := value(fams, "agora_dispatch_phase_seconds", map[string]string{"phase": "runtime"}); got != 6 {
		t.Errorf("agora_dispatch_phase_seconds{phase=runtime} count = %v, want 6 (one per dispatch)", got)
	}
	if got, _ := value(fams, "agora_orch_commit_seconds", nil); got < 1 {
		t.Errorf("agora_orch_commit_seconds has no observations")
	}
	for _, log := range []string{"orch.db", "agora.db"} {
		if got, _ := value(fams, "agora_audit_log_entries", map[string]string{"log": log}); got < 1 {
			t.Errorf("agora_audit_log_entries{log=%s} = %v", log, got)
		}
	}
	if strings.Contains(body, secretValue) {
		t.Errorf("/metrics holds the secret")
	}

	for path, want := range map[string]int{"/healthz": 200, "/readyz": 200} {
		if code, body := s.get(t, path); code != want {
			t.Errorf("%s answered %d, want %d: %s", path, code, want, body)
		}
	}
	if _, body := s.get(t, "/readyz"); !strings.Contains(body, `"orch.db":"ok"`) || !strings.Contains(body, `"engine":"ok"`) {
		t.Errorf("/readyz = %s", body)
	}
	checkLogs(t, s, run)
}

// checkLogs: every transition of the run is a JSON line with the run id, task lines name the
// task, fired lines the dispatch; the retry and the lock wait are logged; no line holds the
// secret.
func checkLogs(t *testing.T, s *served, run api.Run) {
	t.Helper()
	lines := s.logLines(t)
	kinds := map[string]int{}
	var retries, waits int
	for _, l := range lines {
		for _, v := range l {
			if str, ok := v.(string); ok && strings.Contains(str, secretValue) {
				t.Errorf("log line holds the secret: %v", l)
			}
		}
		switch l["msg"] {
		case "transition", "retry":
			if l["run"] != run.ID {
				t.Errorf("log line without the run id: %v", l)
			}
			kind, _ := l["kind"].(string)
			kinds[kind]++
			if strings.HasPrefix(kind, "task.") && l["task"] == nil {
				t.Errorf("task log line without the task id: %v", l)
			}
			if kind == "task.fired" && l["dispatch"] == nil {
				t.Errorf("fired log line without the dispatch id: %v", l)
			}
			if l["msg"] == "retry" {
				retries++
			}
		case "lock wait":
			waits++
			if l["lock"] != "pool" || l["run"] != run.ID {
				t.Errorf("lock wait line: %v", l)
			}
		}
	}
	if kinds["task.fired"] != 6 || kinds["task.succeeded"] != 4 || kinds["run.ended"] != 1 {
		t.Errorf("logged transitions %v, want 6 fired, 4 succeeded, 1 run.ended", kinds)
	}
	if retries != 1 || waits < 1 {
		t.Errorf("logged %d retries and %d lock waits, want 1 and at least 1", retries, waits)
	}
}

func parseMetrics(t *testing.T, body string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// value returns the sample of name whose labels include want: a counter's or gauge's value,
// or a histogram's count.
func value(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, lp := range m.Label {
			have[lp.GetName()] = lp.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}
