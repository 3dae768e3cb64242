package obs

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/orch"
)

// EngineObserver is serve's [orch.Observer]: it counts every committed transition and logs
// it (run, task and dispatch ids), and logs lock waits and re-attaches. Either part may be
// nil.
type EngineObserver struct {
	Metrics *Metrics
	Log     *slog.Logger
	// Spans, when set, turns the engine's entries into trace spans (trace.go).
	Spans interface{ Committed(orch.Batch) }
}

var _ orch.Observer = (*EngineObserver)(nil)

// Committed implements [orch.Observer].
func (o *EngineObserver) Committed(b orch.Batch) {
	if m := o.Metrics; m != nil {
		m.observeBatch(b)
	}
	if o.Log != nil {
		for i := range b.Entries {
			logEntry(o.Log, &b.Entries[i])
		}
	}
	if o.Spans != nil {
		o.Spans.Committed(b)
	}
}

// LockWait implements [orch.Observer].
func (o *EngineObserver) LockWait(runID, runName, taskID, lock string) {
	if m := o.Metrics; m != nil {
		m.lockWaits.Inc()
	}
	if o.Log != nil {
		o.Log.Info("lock wait", "run", runID, "run_name", runName, "task", taskID, "lock", lock)
	}
}

// Reattached implements [orch.Observer].
func (o *EngineObserver) Reattached(a orch.Attempt) {
	if m := o.Metrics; m != nil {
		m.reattached.Inc()
	}
	if o.Log != nil {
		o.Log.Info("re-attach", "run", a.RunID, "run_name", a.RunName, "task", a.TaskID, "dispatch", a.DispatchID, "attempt", a.Number)
	}
}

// observeBatch counts a committed batch.
func (m *Metrics) observeBatch(b orch.Batch) {
	m.commit.Observe(b.Commit.Seconds())
	if !b.Began.IsZero() {
		m.transition.Observe(time.Since(b.Began).Seconds())
	}
	for i := range b.Entries {
		e := &b.Entries[i]
		kind := m.kinds.of(strings.TrimPrefix(e.Kind, "orch."))
		m.transitions.WithLabelValues(kind).Inc()
		m.appends.WithLabelValues("orch.db", kind).Inc()
		switch e.Kind {
		case "orch.task.succeeded", "orch.task.failed", "orch.task.cancelled", "orch.task.needs_input", "orch.task.retry_scheduled":
			if _, ok := e.Details["dispatch_id"]; !ok {
				continue // a task failed without an attempt (a spent run budget)
			}
			state := strings.TrimPrefix(e.Kind, "orch.task.")
			if state == "retry_scheduled" {
				state = "failed"
			}
			m.attemptsEnded.WithLabelValues(state, m.reasons.of(str(e.Details["reason"]))).Inc()
		case "orch.run.ended":
			m.runsEnded.WithLabelValues(m.kinds.of(str(e.Details["state"]))).Inc()
		}
	}
}

// logEntry writes one engine entry as a log line: a transition, a retry, a refusal of the
// budget, a cancel. Only ids, states, reasons and the failure detail (redacted where the
// dispatch recorded it) are logged; never the plan's input, an answer or a repository path.
func logEntry(l *slog.Logger, e *audit.Entry) {
	run, task := splitSubject(e.Subject)
	kind := strings.TrimPrefix(e.Kind, "orch.")
	attrs := make([]any, 0, 16)
	attrs = append(attrs, "kind", kind, "run", run)
	if n := str(e.Details["run_name"]); n != "" {
		attrs = append(attrs, "run_name", n)
	}
	if task != "" {
		attrs = append(attrs, "task", task)
	}
	for _, k := range []string{"dispatch_id", "attempt", "state", "reason", "retry_at", "by", "ancestor", "why"} {
		if v, ok := e.Details[k]; ok && v != "" {
			name := k
			if k == "dispatch_id" {
				name = "dispatch"
			}
			attrs = append(attrs, name, v)
		}
	}
	if d := str(e.Details["detail"]); d != "" {
		attrs = append(attrs, "detail", clip(d, 300))
	}
	msg, level := "transition", slog.LevelInfo
	switch kind {
	case "task.retry_scheduled":
		msg = "retry"
	case "task.failed":
		level = slog.LevelWarn
	case "run.cancel_requested", "task.cancel_requested", "task.answered", "task.retried", "run.seal_requested":
		msg = "command"
	}
	l.Log(context.Background(), level, msg, attrs...)
}

// splitSubject parses "run/ID" and "run/ID/task/TASK".
func splitSubject(s string) (run, task string) {
	rest, ok := strings.CutPrefix(s, "run/")
	if !ok {
		return "", ""
	}
	run, task, _ = strings.Cut(rest, "/task/")
	return run, task
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// clip cuts s to n bytes on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "..."
}
