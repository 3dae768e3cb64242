package service

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/cron"
)

// showRuns is how many of a schedule's runs show lists.
const showRuns = 20

// scheduleRoutes adds the schedule API: add and remove are a person's (the peer check of every
// request applies: serve's own user only); list and show read.
func (s *Server) scheduleRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/schedules", s.scheduleList)
	mux.HandleFunc("POST /v1/schedules", s.scheduleAdd)
	mux.HandleFunc("GET /v1/schedules/{name}", s.scheduleShow)
	mux.HandleFunc("POST /v1/schedules/{name}/remove", s.scheduleRemove)
}

func (s *Server) schedulesOff(w http.ResponseWriter) bool {
	if s.Schedules == nil {
		writeErr(w, http.StatusNotFound, "not_found", "this orchestrator runs no schedules")
		return true
	}
	return false
}

func (s *Server) scheduleAdd(w http.ResponseWriter, r *http.Request) {
	if s.schedulesOff(w) {
		return
	}
	var req api.ScheduleRequest
	if !decode(w, r, &req) {
		return
	}
	if err := cron.CheckName(req.Name); err != nil {
		writeErr(w, http.StatusBadRequest, "invalid", err.Error())
		return
	}
	spec, err := cron.Parse(req.Spec, req.Zone)
	if err != nil {
		writeErr(w, http.StatusBadRequest, "invalid", err.Error())
		return
	}
	// Validated now as a submission would be (catalog references, the workspace and its
	// revision resolved), so a schedule never stores a plan that cannot run today.
	p, _, err := s.prepare(r.Context(), api.SubmitRequest{File: req.File, Source: req.Source, Workspace: req.Workspace, Revision: req.Revision})
	if err != nil {
		writeErr(w, http.StatusBadRequest, "invalid", err.Error())
		return
	}
	sch := &cron.Schedule{Name: req.Name, Spec: spec, Plan: p.Canonical(), Digest: p.Digest(), Workspace: req.Workspace,
		Revision: req.Revision, Actor: req.Actor, PlanName: p.Name, Queue: p.QueueName(), Tasks: len(p.Tasks)}
	if err := s.Schedules.Table.Add(r.Context(), sch, s.Schedules.Now()); err != nil {
		writeScheduleErr(w, err)
		return
	}
	s.Schedules.Wake()
	out, err := s.schedule(r.Context(), sch, false)
	if err != nil {
		writeScheduleErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) scheduleRemove(w http.ResponseWriter, r *http.Request) {
	if s.schedulesOff(w) {
		return
	}
	var req api.ScheduleRemoveRequest
	if !decode(w, r, &req) {
		return
	}
	name := r.PathValue("name")
	sch, err := s.Schedules.Table.Get(r.Context(), name)
	if err != nil {
		writeScheduleErr(w, err)
		return
	}
	if err := s.Schedules.Table.Remove(r.Context(), name, req.Actor); err != nil {
		writeScheduleErr(w, err)
		return
	}
	s.Schedules.Wake()
	out, err := s.schedule(r.Context(), sch, false)
	if err != nil {
		writeScheduleErr(w, err)
		return
	}
	out.NextDue = nil // it has none now
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) scheduleList(w http.ResponseWriter, r *http.Request) {
	if s.schedulesOff(w) {
		return
	}
	list, err := s.Schedules.Table.List(r.Context())
	if err != nil {
		writeScheduleErr(w, err)
		return
	}
	out := api.Schedules{Schedules: make([]api.Schedule, 0, len(list))}
	for _, sch := range list {
		a, err := s.schedule(r.Context(), sch, false)
		if err != nil {
			writeScheduleErr(w, err)
			return
		}
		out.Schedules = append(out.Schedules, a)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) scheduleShow(w http.ResponseWriter, r *http.Request) {
	if s.schedulesOff(w) {
		return
	}
	sch, err := s.Schedules.Table.Get(r.Context(), r.PathValue("name"))
	if err != nil {
		writeScheduleErr(w, err)
		return
	}
	out, err := s.schedule(r.Context(), sch, true)
	if err != nil {
		writeScheduleErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// schedule is sch as the API shows it, with its runs when runs is set.
func (s *Server) schedule(ctx context.Context, sch *cron.Schedule, runs bool) (api.Schedule, error) {
	out := api.Schedule{Name: sch.Name, Spec: sch.Spec.String(), Zone: sch.Spec.Zone(), PlanName: sch.PlanName, PlanDigest: sch.Digest,
		Queue: sch.Queue, Tasks: sch.Tasks, Workspace: sch.Workspace, Revision: sch.Revision, Actor: sch.Actor,
		CreatedAt: sch.CreatedAt, LastRun: sch.LastRun, LastError: sch.LastError, NextDue: timePtr(sch.NextDue), LastSlot: timePtr(sch.LastSlot)}
	if !runs {
		return out, nil
	}
	refs, err := s.Schedules.Table.Runs(ctx, sch.Name, showRuns)
	if err != nil {
		return api.Schedule{}, err
	}
	for _, r := range refs {
		out.Runs = append(out.Runs, api.ScheduleRun{ID: r.ID, State: r.State, Slot: r.Slot, Missed: r.Missed})
	}
	return out, nil
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func writeScheduleErr(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, cron.ErrNotFound):
		writeErr(w, http.StatusNotFound, "not_found", err.Error())
	case errors.Is(err, cron.ErrExists):
		// The name is taken: the request is refused as invalid input, nothing added.
		writeErr(w, http.StatusConflict, "invalid", err.Error())
	default:
		writeEngineErr(w, err)
	}
}
