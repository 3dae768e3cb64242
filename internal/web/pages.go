package web

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/api"
)

// Page sizes.
const (
	maxRuns       = 200
	maxDispatches = 200
	maxAudit      = 300
)

// page renders a page whose body shows objects at the known host paths: a read-only viewer
// gets it masked (hostpaths.go).
func (s *Server) page(w http.ResponseWriter, r *http.Request, name, title, nav string, body any, known ...string) {
	p := principalOf(r.Context())
	body = masked(body, s.mask(r.Context(), known...))
	s.pages.render(w, name, pageData{Title: title, Who: p.name, Operator: p.operator, CSRF: p.csrf, Nav: nav, Body: body})
}

// fail answers an error: not found for what does not exist, and otherwise a message without
// internals (the log has the cause).
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, orch.ErrNotFound), errors.Is(err, dispatch.ErrNotFound):
		http.Error(w, "not found", http.StatusNotFound)
	case errors.Is(err, orch.ErrConflict):
		http.Error(w, "conflict: "+err.Error(), http.StatusConflict)
	default:
		s.log.Warn("web request failed", "path", r.URL.Path, "err", err)
		http.Error(w, "the request could not be answered; the server log says why", http.StatusInternalServerError)
	}
}

type runRow struct {
	api.Run
	Duration time.Duration
}

type runsView struct {
	Runs   []runRow
	State  string
	States []string
	Queues []api.Queue // nil when the view has no queues to show
}

func (s *Server) listRuns(ctx context.Context, state string) ([]runRow, error) {
	runs, err := s.src.Orch.Runs(ctx, maxRuns)
	if err != nil {
		return nil, err
	}
	out := []runRow{}
	for _, r := range runs {
		if state != "" && r.State != state {
			continue
		}
		end := s.now()
		if r.EndedAt != nil {
			end = *r.EndedAt
		}
		if full, err := s.src.Orch.Status(ctx, r.ID); err == nil {
			r.Usage = full.Usage
		}
		out = append(out, runRow{Run: r, Duration: end.Sub(r.CreatedAt)})
	}
	return out, nil
}

func (s *Server) runsPage(w http.ResponseWriter, r *http.Request) {
	state := r.URL.Query().Get("state")
	rows, err := s.listRuns(r.Context(), state)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var repos []string
	for _, row := range rows {
		repos = append(repos, row.Repo)
	}
	s.page(w, r, "runs", "Runs", "runs", runsView{Runs: rows, State: state, Queues: s.queues(r.Context()),
		States: []string{api.RunRunning, api.RunNeedsInput, api.RunSucceeded, api.RunFailed, api.RunCancelled}}, repos...)
}

type runView struct {
	Run      api.Run
	Graph    dagData
	Duration time.Duration
	Asking   []api.Task
	Verified *verifyView
	// Rows are the tasks the table lists: all of them, or the first maxTaskRows of a big run
	// unless ?tasks=all asks for every one (the graph always has every task).
	Rows   []api.Task
	Capped bool
}

// maxTaskRows bounds the run page's task table by default: a 1,000-row table costs the
// browser more than the whole graph drawn only where it is seen.
const maxTaskRows = 100

func (s *Server) runPage(w http.ResponseWriter, r *http.Request) {
	run, err := s.src.Orch.Status(r.Context(), r.PathValue("run"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.addQueueState(r.Context(), &run)
	v := runView{Run: run, Graph: layout(run.Tasks).data(), Rows: run.Tasks}
	if len(v.Rows) > maxTaskRows && r.URL.Query().Get("tasks") != "all" {
		v.Rows, v.Capped = v.Rows[:maxTaskRows], true
	}
	end := s.now()
	if run.EndedAt != nil {
		end = *run.EndedAt
	}
	v.Duration = end.Sub(run.CreatedAt)
	for _, t := range run.Tasks {
		if t.State == api.TaskNeedsInput {
			v.Asking = append(v.Asking, t)
		}
	}
	if run.Sealed && s.verified != nil {
		vv := s.verified.get(r.Context(), run, verifyWait)
		v.Verified = &vv
	}
	s.page(w, r, "run", "Run "+run.Name, "runs", v, run.Repo)
}

type taskView struct {
	Run      api.Run
	Task     api.Task
	Dispatch *dispatchView
}

func (s *Server) taskPage(w http.ResponseWriter, r *http.Request) {
	run, err := s.src.Orch.Status(r.Context(), r.PathValue("run"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	i := slices.IndexFunc(run.Tasks, func(t api.Task) bool { return t.ID == r.PathValue("task") })
	if i < 0 {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	v := taskView{Run: run, Task: run.Tasks[i]}
	known := []string{run.Repo}
	if id := v.Task.DispatchID; id != "" {
		if rec, err := s.src.Dispatches.Get(r.Context(), id); err == nil {
			v.Dispatch = s.dispatchDetail(r.Context(), rec)
			known = append(known, rec.Repo)
		}
	}
	s.page(w, r, "task", "Task "+v.Task.ID, "runs", v, known...)
}

type dispatchRow struct {
	*dispatch.Record
	Elapsed time.Duration
}

func (s *Server) dispatchesPage(w http.ResponseWriter, r *http.Request) {
	recs, err := s.src.Dispatches.List(r.Context(), dispatch.ListFilter{State: r.URL.Query().Get("state"), Limit: maxDispatches})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	inRun, err := s.runDispatches(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	rows := []dispatchRow{}
	var repos []string
	for _, d := range recs {
		if !inRun[d.ID] && !inRun[d.ParentID] {
			rows = append(rows, dispatchRow{Record: d, Elapsed: elapsed(d, s.now())})
			repos = append(repos, d.Repo)
		}
	}
	s.page(w, r, "dispatches", "Dispatches", "dispatches", rows, repos...)
}

// runDispatches are the dispatch ids of every attempt of the recent runs.
func (s *Server) runDispatches(ctx context.Context) (map[string]bool, error) {
	runs, err := s.src.Orch.Runs(ctx, maxRuns)
	if err != nil {
		return nil, err
	}
	ids := map[string]bool{}
	for _, run := range runs {
		full, err := s.src.Orch.Status(ctx, run.ID)
		if err != nil {
			return nil, err
		}
		for _, t := range full.Tasks {
			for _, d := range t.Dispatches {
				ids[d] = true
			}
		}
	}
	return ids, nil
}

func (s *Server) dispatchPage(w http.ResponseWriter, r *http.Request) {
	rec, err := s.src.Dispatches.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	v := s.dispatchDetail(r.Context(), rec)
	if v.Live && s.src.CancelDispatch != nil {
		inRun, err := s.inRun(r.Context(), rec)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		v.Cancellable = !inRun
	}
	s.page(w, r, "dispatch", "Dispatch "+rec.ID, "dispatches", v, rec.Repo)
}

// inRun reports whether rec is an attempt of a recent run, or a child of one.
func (s *Server) inRun(ctx context.Context, rec *dispatch.Record) (bool, error) {
	ids, err := s.runDispatches(ctx)
	if err != nil {
		return false, err
	}
	return ids[rec.ID] || (rec.ParentID != "" && ids[rec.ParentID]), nil
}

type catalogView struct {
	Kinds []catalogKind
	Err   string
}

type catalogKind struct {
	Kind     catalog.Kind
	Versions []catalog.Version
}

func (s *Server) catalogPage(w http.ResponseWriter, r *http.Request) {
	v := catalogView{}
	if s.src.Catalog == nil {
		v.Err = "the catalog is not available here"
	} else {
		for _, k := range []catalog.Kind{catalog.KindSubagent, catalog.KindCapability, catalog.KindEnv, catalog.KindWorkspace} {
			vs, err := s.src.Catalog(r.Context(), k)
			if err != nil {
				s.fail(w, r, err)
				return
			}
			v.Kinds = append(v.Kinds, catalogKind{Kind: k, Versions: vs})
		}
	}
	s.page(w, r, "catalog", "Catalog", "catalog", v)
}

type auditView struct {
	Log        string
	Entries    []auditRow
	TreeSize   uint64
	Checkpoint *audit.StoredCheckpoint
	Behind     uint64
	Err        string
}

type auditRow struct {
	audit.Record
	Details string
}

func (s *Server) auditPage(w http.ResponseWriter, r *http.Request) {
	v := auditView{Log: "agora.db"}
	q := s.src.MainLog
	if r.URL.Query().Get("log") == "orch" {
		v.Log, q = "orch.db", s.src.OrchLog
	}
	if q == nil {
		v.Err = "this log is not available here"
		s.page(w, r, "audit", "Audit log", "audit", v)
		return
	}
	ctx := r.Context()
	recs, err := audit.List(ctx, q, audit.ListOptions{Limit: maxAudit, Kind: r.URL.Query().Get("kind")})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// The repositories the entries name are hidden wherever else they occur.
	var repos []string
	m := s.mask(ctx)
	for i := len(recs) - 1; i >= 0; i-- {
		if repo, ok := recs[i].Details["repo"].(string); ok {
			repos = append(repos, repo)
		}
	}
	if m != nil {
		m.Add(repos...)
	}
	for i := len(recs) - 1; i >= 0; i-- {
		v.Entries = append(v.Entries, auditRow{Record: recs[i], Details: compactJSON(masked(recs[i].Details, m))})
	}
	if v.TreeSize, err = audit.TreeSize(ctx, q); err != nil {
		s.fail(w, r, err)
		return
	}
	if cp, err := audit.LatestCheckpoint(ctx, q); err == nil && cp != nil {
		v.Checkpoint = cp
		if v.TreeSize > cp.Size {
			v.Behind = v.TreeSize - cp.Size
		}
	}
	s.page(w, r, "audit", "Audit log", "audit", v, repos...)
}

func compactJSON(v any) string {
	if v == nil {
		return ""
	}
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

// writeJSON answers v as JSON, with every character an agent could use to reorder or hide
// text written as a JSON escape: a program decodes the same string, a person viewing the
// answer sees the escape (agenttext.go).
func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "the answer could not be encoded", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(append(jsonEscapeHidden(b), '\n'))
}

func (s *Server) apiRuns(w http.ResponseWriter, r *http.Request) {
	rows, err := s.listRuns(r.Context(), r.URL.Query().Get("state"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := make([]api.Run, len(rows))
	var repos []string
	for i, row := range rows {
		out[i] = row.Run
		repos = append(repos, row.Repo)
	}
	writeJSON(w, masked(out, s.mask(r.Context(), repos...)))
}

func (s *Server) apiRun(w http.ResponseWriter, r *http.Request) {
	run, err := s.src.Orch.Status(r.Context(), r.PathValue("run"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.addQueueState(r.Context(), &run)
	writeJSON(w, masked(run, s.mask(r.Context(), run.Repo)))
}

func (s *Server) apiDispatch(w http.ResponseWriter, r *http.Request) {
	rec, err := s.src.Dispatches.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, masked(rec, s.mask(r.Context(), rec.Repo)))
}

var _ = strconv.Itoa
