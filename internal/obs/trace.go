package obs

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/tracing"
)

// Span names of the engine: a run, and each task of it (from its first attempt to its end).
// A task's attempts are dispatches, whose spans their supervisors export as its children.
const (
	SpanRun  = "agora.run"
	SpanTask = "agora.task"
)

// EngineSpans turns the engine's committed entries into the spans of runs and tasks, for
// [EngineObserver.Spans]. A run is traced when its run.submitted entry carries a trace (the
// service chose its ids at submit, so the record names the run's span before it exists). A
// run or task still open when serve stops is not exported; the dispatches it started carry
// the ids all the same.
type EngineSpans struct {
	t *tracing.Tracer

	mu         sync.Mutex
	runs       map[string]*openRun
	byDispatch map[string]context.Context // the task span each live attempt runs under
}

type openRun struct {
	ctx   context.Context
	end   tracing.End
	tasks map[string]*openTask
}

type openTask struct {
	ctx      context.Context
	end      tracing.End
	attempts int
}

// NewEngineSpans returns the tracker; nil when t is off, which records nothing.
func NewEngineSpans(t *tracing.Tracer) *EngineSpans {
	if !t.Enabled() {
		return nil
	}
	return &EngineSpans{t: t, runs: map[string]*openRun{}, byDispatch: map[string]context.Context{}}
}

// Committed starts and ends spans for the batch's entries. It only starts and ends spans
// in memory: the exporter batches them on its own goroutine.
func (s *EngineSpans) Committed(b orch.Batch) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range b.Entries {
		s.entry(&b.Entries[i])
	}
}

func (s *EngineSpans) entry(e *audit.Entry) {
	runID, taskID := splitSubject(e.Subject)
	switch e.Kind {
	case "orch.run.submitted":
		id := str(e.Details["trace_id"])
		if id == "" {
			return
		}
		ctx := s.t.WithIDs(tracing.Join(context.Background(), str(e.Details["trace_parent"])), id, str(e.Details["trace_span"]))
		ctx, end := s.t.Start(ctx, SpanRun, time.Time{}, "agora.run.id", runID, "agora.run.name", str(e.Details["run_name"]), "agora.run.tasks", e.Details["tasks"])
		s.runs[runID] = &openRun{ctx: ctx, end: end, tasks: map[string]*openTask{}}
	case "orch.task.fired":
		r := s.runs[runID]
		if r == nil {
			return
		}
		t := r.tasks[taskID]
		if t == nil {
			ctx, end := s.t.Start(r.ctx, SpanTask, time.Time{}, "agora.run.id", runID, "agora.task.id", taskID, "agora.subagent", str(e.Details["subagent"]))
			t = &openTask{ctx: ctx, end: end}
			r.tasks[taskID] = t
		}
		t.attempts++
		if d := str(e.Details["dispatch_id"]); d != "" {
			s.byDispatch[d] = t.ctx
		}
	case "orch.task.succeeded", "orch.task.failed", "orch.task.cancelled", "orch.task.skipped":
		if d := str(e.Details["dispatch_id"]); d != "" {
			delete(s.byDispatch, d)
		}
		r := s.runs[runID]
		if r == nil || r.tasks[taskID] == nil {
			return
		}
		t := r.tasks[taskID]
		state := strings.TrimPrefix(e.Kind, "orch.task.")
		errText := ""
		if state == "failed" {
			errText = "failed/" + str(e.Details["reason"])
		}
		t.end(time.Time{}, errText, "agora.task.state", state, "agora.task.attempts", t.attempts, "agora.reason", str(e.Details["reason"]))
		delete(r.tasks, taskID)
	case "orch.task.retry_scheduled", "orch.task.needs_input":
		if d := str(e.Details["dispatch_id"]); d != "" {
			delete(s.byDispatch, d)
		}
	case "orch.run.ended":
		r := s.runs[runID]
		if r == nil {
			return
		}
		state := str(e.Details["state"])
		for id, t := range r.tasks {
			t.end(time.Time{}, "", "agora.task.state", "open at run end", "agora.task.attempts", t.attempts)
			delete(r.tasks, id)
		}
		errText := ""
		if state != "succeeded" {
			errText = state
		}
		r.end(time.Time{}, errText, "agora.run.state", state)
		delete(s.runs, runID)
	}
}

// Traceparent is the traceparent of the task span the attempt dispatchID runs under, for
// the executor to record on its dispatch; "" when the run is not traced.
func (s *EngineSpans) Traceparent(dispatchID string) string {
	if s == nil {
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return tracing.Traceparent(s.byDispatch[dispatchID])
}
