package obs

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/lifecycle"
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
	runID, taskID := entry.SplitRun(e.Subject)
	switch e.Kind {
	case entry.RunSubmitted:
		id := str(e.Details[entry.KeyTraceID])
		if id == "" {
			return
		}
		ctx := s.t.WithIDs(tracing.Join(context.Background(), str(e.Details[entry.KeyTraceParent])), id, str(e.Details[entry.KeyTraceSpan]))
		ctx, end := s.t.Start(ctx, SpanRun, time.Time{}, "agora.run.id", runID, "agora.run.name", str(e.Details[entry.KeyRunName]), "agora.run.tasks", e.Details[entry.KeyTasks])
		s.runs[runID] = &openRun{ctx: ctx, end: end, tasks: map[string]*openTask{}}
	case entry.TaskFired:
		r := s.runs[runID]
		if r == nil {
			return
		}
		t := r.tasks[taskID]
		if t == nil {
			ctx, end := s.t.Start(r.ctx, SpanTask, time.Time{}, "agora.run.id", runID, "agora.task.id", taskID, "agora.subagent", str(e.Details[entry.KeySubagent]))
			t = &openTask{ctx: ctx, end: end}
			r.tasks[taskID] = t
		}
		t.attempts++
		if d := str(e.Details[entry.KeyDispatchID]); d != "" {
			s.byDispatch[d] = t.ctx
		}
	case entry.TaskSucceeded, entry.TaskFailed, entry.TaskCancelled, entry.TaskSkipped:
		if d := str(e.Details[entry.KeyDispatchID]); d != "" {
			delete(s.byDispatch, d)
		}
		r := s.runs[runID]
		if r == nil || r.tasks[taskID] == nil {
			return
		}
		t := r.tasks[taskID]
		state := strings.TrimPrefix(e.Kind, entry.TaskPrefix)
		errText := ""
		if state == lifecycle.TaskFailed {
			errText = "failed/" + str(e.Details[entry.KeyReason])
		}
		t.end(time.Time{}, errText, "agora.task.state", state, "agora.task.attempts", t.attempts, "agora.reason", str(e.Details[entry.KeyReason]))
		delete(r.tasks, taskID)
	case entry.TaskRetryScheduled, entry.TaskNeedsInput:
		if d := str(e.Details[entry.KeyDispatchID]); d != "" {
			delete(s.byDispatch, d)
		}
	case entry.RunEnded:
		r := s.runs[runID]
		if r == nil {
			return
		}
		state := str(e.Details[entry.KeyState])
		for id, t := range r.tasks {
			t.end(time.Time{}, "", "agora.task.state", "open at run end", "agora.task.attempts", t.attempts)
			delete(r.tasks, id)
		}
		errText := ""
		if state != lifecycle.RunSucceeded {
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
