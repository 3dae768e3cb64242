package obs

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/lifecycle"
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
		kind := m.kinds.Of(strings.TrimPrefix(e.Kind, entry.OrchPrefix))
		m.transitions.WithLabelValues(kind).Inc()
		m.appends.WithLabelValues("orch.db", kind).Inc()
		switch e.Kind {
		case entry.TaskSucceeded, entry.TaskFailed, entry.TaskCancelled, entry.TaskNeedsInput, entry.TaskRetryScheduled:
			if _, ok := e.Details[entry.KeyDispatchID]; !ok {
				continue // a task failed without an attempt (a spent run budget)
			}
			state := strings.TrimPrefix(e.Kind, entry.TaskPrefix)
			if e.Kind == entry.TaskRetryScheduled {
				state = lifecycle.TaskFailed
			}
			m.attemptsEnded.WithLabelValues(state, m.reasons.Of(str(e.Details[entry.KeyReason]))).Inc()
		case entry.RunEnded:
			m.runsEnded.WithLabelValues(m.kinds.Of(str(e.Details[entry.KeyState]))).Inc()
		}
	}
}

// logEntry writes one engine entry as a log line: a transition, a retry, a refusal of the
// budget, a cancel. Only ids, states, reasons and the failure detail (redacted where the
// dispatch recorded it) are logged; never the plan's input, an answer or a repository path.
func logEntry(l *slog.Logger, e *audit.Entry) {
	run, task := entry.SplitRun(e.Subject)
	kind := strings.TrimPrefix(e.Kind, entry.OrchPrefix)
	attrs := make([]any, 0, 16)
	attrs = append(attrs, "kind", kind, "run", run)
	if n := str(e.Details[entry.KeyRunName]); n != "" {
		attrs = append(attrs, "run_name", n)
	}
	if task != "" {
		attrs = append(attrs, "task", task)
	}
	for _, k := range []string{entry.KeyDispatchID, entry.KeyAttempt, entry.KeyState, entry.KeyReason, entry.KeyRetryAt, entry.KeyBy, entry.KeyAncestor, entry.KeyWhy} {
		if v, ok := e.Details[k]; ok && v != "" {
			name := k
			if k == entry.KeyDispatchID {
				name = "dispatch"
			}
			attrs = append(attrs, name, v)
		}
	}
	if d := str(e.Details[entry.KeyDetail]); d != "" {
		attrs = append(attrs, "detail", clip(d, 300))
	}
	msg, level := "transition", slog.LevelInfo
	switch e.Kind {
	case entry.TaskRetryScheduled:
		msg = "retry"
	case entry.TaskFailed:
		level = slog.LevelWarn
	case entry.RunCancelRequested, entry.TaskCancelRequested, entry.TaskAnswered, entry.TaskRetried, entry.RunSealRequested:
		msg = "command"
	}
	l.Log(context.Background(), level, msg, attrs...)
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
