package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/api"
)

// The catalog lists answer catalog's list entries (catalog.CapabilityEntry and its kin), the
// type `agora KIND list -o json` prints too; the CLI adds only catalog.HostOnly.

func (s *Server) capabilitiesList(ctx context.Context, _ Principal, _ noArgs) (any, error) {
	out, err := listEntries(ctx, s.cfg.Catalog, catalog.KindCapability, catalog.NewCapabilityEntry)
	if err != nil {
		return nil, err
	}
	return CapabilitiesAnswer{Capabilities: out}, nil
}

func (s *Server) subagentsList(ctx context.Context, _ Principal, _ noArgs) (any, error) {
	out, err := listEntries(ctx, s.cfg.Catalog, catalog.KindSubagent, catalog.NewSubagentEntry)
	if err != nil {
		return nil, err
	}
	return SubagentsAnswer{Subagents: out}, nil
}

func (s *Server) envsList(ctx context.Context, _ Principal, _ noArgs) (any, error) {
	out, err := listEntries(ctx, s.cfg.Catalog, catalog.KindEnv, catalog.NewEnvEntry)
	if err != nil {
		return nil, err
	}
	return EnvsAnswer{Envs: out}, nil
}

// listEntries is every latest version of kind as entry makes it, never nil.
func listEntries[E any](ctx context.Context, c Catalog, kind catalog.Kind, entry func(catalog.Version) E) ([]E, error) {
	vs, err := c.List(ctx, kind)
	if err != nil {
		return nil, err
	}
	out := make([]E, 0, len(vs))
	for _, v := range vs {
		out = append(out, entry(v))
	}
	return out, nil
}

// DispatchAnswer is what the dispatch tools (run, describe, cancel) answer: the record, what
// it produced (bounded), and a note on what to do next.
type DispatchAnswer struct {
	Dispatch *Record  `json:"dispatch"`
	Results  *Results `json:"results"`
	Note     string   `json:"note,omitempty"`
}

// result is a record with what it produced (bounded) and, when something could not be read
// or is still to come, a note saying so.
func (s *Server) result(ctx context.Context, r *Record) DispatchAnswer {
	res, notes := s.results(ctx, r)
	out := DispatchAnswer{Dispatch: s.public(r), Results: res}
	if !r.Done {
		notes = append(notes, "still running; call agora_dispatch_describe with this id to follow it, or agora_dispatch_cancel to stop it")
	}
	switch {
	case r.State == lifecycle.DispatchNeedsInput && r.RunID != "":
		notes = append(notes, fmt.Sprintf("it asks a question (needs_input) as task %q of run %s; a run's questions are answered on the host: %s", r.TaskID, r.RunID, api.AnswerCommand(r.RunID, r.TaskID)))
	case r.State == lifecycle.DispatchNeedsInput:
		notes = append(notes, fmt.Sprintf("it asks a question (needs_input); answer with agora_dispatch {\"resume\": {\"dispatch\": %q, \"answer\": \"...\"}}", r.ID))
	case r.State == lifecycle.DispatchAnswered:
		notes = append(notes, fmt.Sprintf("its question was answered by %s: child %s", r.AnsweredBy, r.ChildID))
	}
	if n := s.noWorkspaceNote(ctx, r); n != "" {
		notes = append(notes, n)
	}
	out.Note = strings.Join(notes, "; ")
	return out
}

func (s *Server) dispatch(ctx context.Context, p Principal, a dispatchArgs) (any, error) {
	wait := time.Duration(defaultWait) * time.Second
	if a.WaitSeconds != nil {
		wait = time.Duration(*a.WaitSeconds) * time.Second
	}
	if a.Resume != nil {
		r, err := s.cfg.Dispatcher.Resume(ctx, p, a.Resume.Dispatch, a.Resume.Answer)
		if err != nil {
			return nil, notFound(err, "dispatch", a.Resume.Dispatch)
		}
		return s.result(ctx, s.await(ctx, r, wait)), nil
	}
	req := DispatchRequest{Subagent: *a.Subagent, Envs: a.Envs, Input: a.Input, Actor: "mcp:" + p.Client}
	if a.Workspace != nil {
		req.Workspace = *a.Workspace
	}
	if a.Revision != nil {
		req.Revision = *a.Revision
	}
	if a.Target != nil {
		req.Target = *a.Target
	}
	if a.TimeoutSeconds != nil {
		req.Timeout = time.Duration(*a.TimeoutSeconds) * time.Second
	}
	r, err := s.cfg.Dispatcher.Dispatch(ctx, req)
	if err != nil {
		return nil, err
	}
	return s.result(ctx, s.await(ctx, r, wait)), nil
}

// await follows r until it ends, wait passes or ctx ends, and returns the latest record. A
// failed poll returns what it had: the dispatch runs on regardless.
func (s *Server) await(ctx context.Context, r *Record, wait time.Duration) *Record {
	return s.follow(ctx, r, wait, func(r *Record) bool { return r.Done })
}

func (s *Server) dispatchDescribe(ctx context.Context, _ Principal, a describeArgs) (any, error) {
	r, err := s.cfg.Dispatcher.Get(ctx, a.ID)
	if err != nil {
		return nil, notFound(err, "dispatch", a.ID)
	}
	if a.WaitSeconds != nil && !r.Done {
		// Until its state or phase moves, or it ends; one that already ended (needs_input
		// included) is answered at once.
		first := r
		r = s.follow(ctx, r, time.Duration(*a.WaitSeconds)*time.Second, func(cur *Record) bool { return cur.Done || differs(first, cur) })
	}
	if !r.Final() {
		return s.result(ctx, r), nil
	}
	// A final dispatch never changes: its answer is encoded (and masked) once.
	if b, ok := s.resultCache.encoded(r.ID); ok {
		return encoded(b), nil
	}
	b, err := s.encode(s.result(ctx, r))
	if err != nil {
		return nil, err
	}
	s.resultCache.putEncoded(r.ID, b)
	return encoded(b), nil
}

func (s *Server) dispatchCancel(ctx context.Context, _ Principal, a idArgs) (any, error) {
	r, err := s.cfg.Dispatcher.Cancel(ctx, a.ID)
	if err != nil {
		return nil, notFound(err, "dispatch", a.ID)
	}
	return s.result(ctx, r), nil
}

func (s *Server) orchestratorSubmit(ctx context.Context, p Principal, a submitArgs) (any, error) {
	if s.cfg.Orchestrator == nil {
		return nil, ErrOrchestratorDown
	}
	resp, err := s.cfg.Orchestrator.Submit(ctx, "mcp:"+p.Client, a.Plan, a.NewRun)
	if err != nil {
		return nil, err
	}
	// The service's answer as `agora orch submit -o json` prints it: {run, created, message}.
	var out api.SubmitResponse
	if err := json.Unmarshal(resp, &out); err != nil {
		return nil, fmt.Errorf("orchestrator submit: unreadable answer: %w", err)
	}
	return out, nil
}

func (s *Server) orchestratorStatus(ctx context.Context, _ Principal, a runArgs) (any, error) {
	if s.cfg.Orchestrator == nil {
		return nil, ErrOrchestratorDown
	}
	run, err := s.cfg.Orchestrator.Status(ctx, a.RunID)
	if err != nil {
		return nil, notFound(err, "run", a.RunID)
	}
	return RunAnswer{Run: s.publicRun(ctx, run)}, nil
}

// publicRun is run fit to send: each task's free text (a failure detail, a question) with
// host paths masked as a dispatch's are, and each task that waits for an answer given the
// options its dispatch offered, as `agora orch status` shows them (the service keeps the
// question; the dispatch record has both; a dispatch it cannot get is left out). Status and
// watch both answer so (watch left the options out). A run it cannot read
// becomes one with only its state "unknown" rather than passing on unmasked.
func (s *Server) publicRun(ctx context.Context, run json.RawMessage) api.Run {
	var r api.Run
	if json.Unmarshal(run, &r) != nil {
		s.log.Error("run document does not parse")
		return api.Run{State: "unknown", Counts: map[string]int{}}
	}
	for i := range r.Tasks {
		t := &r.Tasks[i]
		t.Detail, t.Question = s.scrub(t.Detail), s.scrub(t.Question)
		for j, o := range t.Options {
			t.Options[j] = s.scrub(o)
		}
		if t.State != lifecycle.TaskNeedsInput || t.DispatchID == "" || len(t.Options) > 0 {
			continue
		}
		d, err := s.cfg.Dispatcher.Get(ctx, t.DispatchID)
		if err != nil || d.NeedsInput == nil || len(d.NeedsInput.Options) == 0 {
			continue
		}
		t.Options = make([]string, len(d.NeedsInput.Options))
		for j, o := range d.NeedsInput.Options {
			t.Options[j] = s.scrub(o)
		}
	}
	return r
}

func (s *Server) orchestratorWatch(ctx context.Context, _ Principal, a watchArgs) (any, error) {
	if s.cfg.Orchestrator == nil {
		return nil, ErrOrchestratorDown
	}
	timeout := time.Duration(defaultWatchTO) * time.Second
	if a.TimeoutSeconds != nil {
		timeout = time.Duration(*a.TimeoutSeconds) * time.Second
	}
	progress := progressOf(ctx)
	start := time.Now()
	stop, ticking := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ticking)
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				progress(fmt.Sprintf("run %s: waiting for a change, %ds elapsed", a.RunID, int(time.Since(start).Seconds())))
			}
		}
	}()
	progress(fmt.Sprintf("run %s: watching for up to %s", a.RunID, timeout))
	run, err := s.cfg.Orchestrator.Watch(ctx, a.RunID, timeout)
	// The ticker is gone before the last notification and the answer: progress stops at
	// completion, and none comes after the state it ends with.
	close(stop)
	<-ticking
	if err != nil {
		return nil, notFound(err, "run", a.RunID)
	}
	pub := s.publicRun(ctx, run)
	// The run as the service's stream carries it, which is what `agora orch watch -o json`
	// prints: the queue's state now is status's (a run waiting for a person is answered from
	// its status, which has it).
	pub.QueueState = nil
	progress(fmt.Sprintf("run %s: %s, %ds elapsed", a.RunID, pub.State, int(time.Since(start).Seconds())))
	return RunAnswer{Run: pub}, nil
}

func (s *Server) orchestratorSchedules(ctx context.Context, _ Principal, _ noArgs) (any, error) {
	if s.cfg.Orchestrator == nil {
		return nil, ErrOrchestratorDown
	}
	doc, err := s.cfg.Orchestrator.Schedules(ctx)
	if err != nil {
		return nil, err
	}
	var v api.Schedules
	if err := json.Unmarshal(doc, &v); err != nil || v.Schedules == nil {
		return nil, fmt.Errorf("orchestrator schedules: unreadable answer")
	}
	return v, nil
}

func (s *Server) orchestratorSchedule(ctx context.Context, _ Principal, a scheduleArgs) (any, error) {
	if s.cfg.Orchestrator == nil {
		return nil, ErrOrchestratorDown
	}
	doc, err := s.cfg.Orchestrator.Schedule(ctx, a.Name)
	if err != nil {
		return nil, notFound(err, "schedule", a.Name)
	}
	var v ScheduleAnswer
	if err := json.Unmarshal(doc, &v.Schedule); err != nil {
		return nil, fmt.Errorf("orchestrator schedule: unreadable answer: %w", err)
	}
	return v, nil
}
