package web

import (
	"net/http"

	"github.com/agora-dev/agora/internal/orch/api"
)

// Actions answer a form with a redirect back to the page it came from, and a script's call
// (Accept: application/json) with the run or approval as JSON. Every one is recorded by the
// engine or the dispatch records with "web:NAME" as its actor.

func (s *Server) done(w http.ResponseWriter, r *http.Request, back string, v any) {
	if r.Header.Get("Accept") == "application/json" {
		writeJSON(w, v)
		return
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
}

func (s *Server) runAction(w http.ResponseWriter, r *http.Request, name string, do func(ctx_ *http.Request, req api.ActionRequest) error) {
	p := principalOf(r.Context())
	req := api.ActionRequest{Run: r.PathValue("run"), Task: r.PathValue("task"), Actor: p.actor(), Answer: r.PostFormValue("answer")}
	if err := do(r, req); err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info("web action", "action", name, "run_id", req.Run, "task_id", req.Task, "actor", req.Actor)
	run, err := s.src.Runs.Run(r.Context(), req.Run)
	if err == nil {
		s.summaries.invalidate(run.ID)
		run, err = s.summaries.of(r.Context(), run, 0)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	back := "/runs/" + run.ID
	if req.Task != "" {
		back += "/tasks/" + req.Task
	}
	s.done(w, r, back, masked(run, s.mask(r.Context(), run.Repo)))
}

func (s *Server) cancelRun(w http.ResponseWriter, r *http.Request) {
	s.runAction(w, r, "cancel", func(r *http.Request, req api.ActionRequest) error { return s.src.Orch.Cancel(r.Context(), req) })
}

func (s *Server) retryRun(w http.ResponseWriter, r *http.Request) {
	s.runAction(w, r, "retry", s.retryFailed)
}

func (s *Server) answerTask(w http.ResponseWriter, r *http.Request) {
	if r.PostFormValue("answer") == "" {
		http.Error(w, "an answer is required", http.StatusBadRequest)
		return
	}
	s.runAction(w, r, "answer", func(r *http.Request, req api.ActionRequest) error { return s.src.Orch.Answer(r.Context(), req) })
}

func (s *Server) decideApproval(w http.ResponseWriter, r *http.Request) {
	p := principalOf(r.Context())
	id, call := r.PathValue("id"), r.PathValue("call")
	var approve bool
	switch r.PathValue("decision") {
	case "approve":
		approve = true
	case "deny":
		if r.PostFormValue("reason") == "" {
			http.Error(w, "a reason is required to deny: the model reads it", http.StatusBadRequest)
			return
		}
	default:
		http.NotFound(w, r)
		return
	}
	a, err := s.src.Dispatches.DecideApproval(r.Context(), id, call, approve, r.PostFormValue("reason"), p.actor(), r.PostFormValue("digest"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info("web action", "action", r.PathValue("decision"), "dispatch_id", id, "call_id", call, "actor", p.actor())
	s.done(w, r, "/dispatches/"+id, a)
}

// cancelDispatch cancels a dispatch that is not in a run. An attempt of a run is refused
// with 409: the engine cancels it, so the run records why and what follows.
func (s *Server) cancelDispatch(w http.ResponseWriter, r *http.Request) {
	if s.src.CancelDispatch == nil {
		http.Error(w, "cancelling dispatches is not available here", http.StatusNotImplemented)
		return
	}
	p := principalOf(r.Context())
	rec, err := s.src.Dispatches.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	inRun, err := s.inRun(r.Context(), rec)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if inRun {
		conflict(w, "dispatch "+rec.ID+" is an attempt of a run; cancel its task or run from the run's page")
		return
	}
	if rec, err = s.src.CancelDispatch(r.Context(), rec.ID, p.actor()); err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info("web action", "action", "cancel", "dispatch_id", rec.ID, "actor", p.actor())
	s.done(w, r, "/dispatches/"+rec.ID, rec)
}
