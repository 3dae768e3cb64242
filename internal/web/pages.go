package web

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/compute/warm"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/errclass"
	"github.com/agora-dev/agora/internal/lifecycle"
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
	var nf *errclass.NotFoundError
	switch {
	case errors.Is(err, orch.ErrNotFound) && errors.As(err, &nf) && nf.Note != "":
		// A run retention purged says so (when, by whom, why), not a bare "not found".
		http.Error(w, nf.Error(), http.StatusNotFound)
	case errors.Is(err, orch.ErrNotFound), errors.Is(err, dispatch.ErrNotFound):
		http.Error(w, "not found", http.StatusNotFound)
	case errors.Is(err, errBusy):
		w.Header().Set("Retry-After", "1")
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
	case errors.Is(err, errTooMany):
		w.Header().Set("Retry-After", "1")
		http.Error(w, err.Error(), http.StatusTooManyRequests)
	case errors.Is(err, orch.ErrConflict):
		conflict(w, err.Error())
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
	Queues []api.Queue   // nil when the view has no queues to show
	Warm   []warm.Counts // the warm targets' slots; nil when serve holds none
}

// listRuns are the newest runs (in state, when set) with their summaries.
func (s *Server) listRuns(ctx context.Context, state string, fresh time.Duration) ([]runRow, error) {
	runs, err := s.src.Runs.Runs(ctx, maxRuns)
	if err != nil {
		return nil, err
	}
	out := []runRow{}
	for _, r := range runs {
		if state != "" && r.State != state {
			continue
		}
		if r, err = s.summaries.of(ctx, r, fresh); err != nil {
			return nil, err
		}
		end := s.now()
		if r.EndedAt != nil {
			end = *r.EndedAt
		}
		out = append(out, runRow{Run: r, Duration: end.Sub(r.CreatedAt)})
	}
	return out, nil
}

func (s *Server) runsPage(w http.ResponseWriter, r *http.Request) {
	state := r.URL.Query().Get("state")
	rows, err := s.listRuns(r.Context(), state, pageFresh)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var repos []string
	for _, row := range rows {
		repos = append(repos, row.Repo)
	}
	s.page(w, r, "runs", "Runs", "runs", runsView{Runs: rows, State: state, Queues: s.queues(r.Context()), Warm: s.warmSlots(),
		States: lifecycle.RunStates()}, repos...)
}

// runSummary reads run ref with its summary.
func (s *Server) runSummary(ctx context.Context, ref string, fresh time.Duration) (api.Run, error) {
	run, err := s.src.Runs.Run(ctx, ref)
	if err != nil {
		return run, err
	}
	return s.summaries.of(ctx, run, fresh)
}

// Sizes of a run page: its table lists taskPage tasks at a time (?from=N pages on), its
// questions at most maxAsking.
const (
	taskPage  = 100
	maxAsking = 20
)

type runView struct {
	Run      api.Run
	Duration time.Duration
	Asking   []api.Task
	Verified *verifyView
	// Rows are the tasks the table lists, from plan position From; Prev and Next are the
	// positions of the pages before and after (-1: none).
	Rows             []api.Task
	From, Prev, Next int
	// Shaped says the rows carry their plan's subagent, dependencies and locks (the run's
	// shape was ready in time; the next load has them).
	Shaped bool
}

func (s *Server) runPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	run, err := s.runSummary(ctx, r.PathValue("run"), pageFresh)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.addQueueState(ctx, &run)
	v := runView{Run: run, Prev: -1, Next: -1}
	v.From, _ = strconv.Atoi(r.URL.Query().Get("from"))
	v.From = min(max(v.From, 0), max(run.Total-1, 0))
	rows, err := s.src.Runs.Tasks(ctx, run.ID, v.From, taskPage)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	sh, ok, _ := s.shapes.get(ctx, run.ID, run.Total, shapeWait)
	v.Shaped = ok
	products, err := s.products(ctx, run.ID, sh, rows)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	for _, t := range rows {
		task := withShape(t, sh)
		task.Product = products[t.Index] // a fixed task shows its fix's work, as the stream's rows do
		v.Rows = append(v.Rows, task)
	}
	s.markLearn(ctx, run.ID, v.Rows)
	if v.From > 0 {
		v.Prev = max(v.From-taskPage, 0)
	}
	if v.From+taskPage < run.Total {
		v.Next = v.From + taskPage
	}
	end := s.now()
	if run.EndedAt != nil {
		end = *run.EndedAt
	}
	v.Duration = end.Sub(run.CreatedAt)
	if run.Counts[lifecycle.TaskNeedsInput] > 0 {
		asking, err := s.src.Runs.TasksIn(ctx, run.ID, lifecycle.TaskNeedsInput, maxAsking)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		for _, t := range asking {
			v.Asking = append(v.Asking, t.Task)
		}
	}
	if run.Sealed && s.verified != nil {
		vv := s.verified.get(ctx, run, verifyWait)
		v.Verified = &vv
	}
	s.page(w, r, "run", "Run "+run.Name, "runs", v, run.Repo)
}

// withShape is t with what its run's plan says of it, when the shape is known.
func withShape(t orch.TaskRow, sh *shape) api.Task {
	task := t.Task
	if sh == nil || t.Index < 0 || t.Index >= len(sh.ids) || sh.ids[t.Index] != t.ID {
		return task
	}
	task.Added = sh.addedAt(t.Index)
	task.Subagent = sh.sub[t.Index]
	task.Verify = sh.verify[t.Index]
	task.Learn = sh.learn[t.Index]
	task.DependsOn = sh.depNames(t.Index)
	if sh.locks[t.Index] != "" {
		task.Locks = strings.Split(sh.locks[t.Index], ", ")
	}
	for k, d := range sh.depsOf(t.Index) {
		if sh.needs[int(sh.depStart[t.Index])+k] {
			task.Needs = append(task.Needs, sh.ids[d])
		}
	}
	return task
}

// products are the products of those of rows that succeeded with a fix of their work, by
// position: the dispatch of the newest fix that succeeded, as orch status says (one read of
// their fixes' rows; none without a shape, or when no row has a fix).
func (s *Server) products(ctx context.Context, runID string, sh *shape, rows []orch.TaskRow) (map[int]string, error) {
	if sh == nil || len(sh.fixes) == 0 {
		return nil, nil
	}
	var fixes []int
	for _, t := range rows {
		if t.State == lifecycle.TaskSucceeded {
			for _, f := range sh.fixes[int32(t.Index)] {
				fixes = append(fixes, int(f))
			}
		}
	}
	if len(fixes) == 0 {
		return nil, nil
	}
	got, err := s.src.Runs.TasksAt(ctx, runID, fixes)
	if err != nil {
		return nil, err
	}
	out := map[int]string{}
	for _, f := range got { // in position order: the newest fix last
		if a := sh.addedAt(f.Index); a != nil && f.State == lifecycle.TaskSucceeded {
			out[int(sh.index[a.Task])] = f.DispatchID
		}
	}
	return out, nil
}

type taskView struct {
	Run      api.Run
	Task     api.Task
	Dispatch *dispatchView
	// PlanLearn: the plan says learn: true (Task.Learn is also set when the task's dispatch
	// was a learn dispatch, its target in mode: learn).
	PlanLearn bool
}

// markLearn marks learn each of rows whose dispatch was a learn dispatch: a task on a
// target in mode: learn is one though its plan does not say so (docs/learn.md; the
// service's run document marks it the same way). A run whose dispatches cannot be read
// keeps its plan's marks.
func (s *Server) markLearn(ctx context.Context, runID string, rows []api.Task) {
	learn, err := s.src.Dispatches.LearnInRun(ctx, runID)
	if err != nil || len(learn) == 0 {
		return
	}
	for i := range rows {
		if learn[rows[i].DispatchID] {
			rows[i].Learn = true
		}
	}
}

func (s *Server) taskPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	run, err := s.runSummary(ctx, r.PathValue("run"), pageFresh)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// With the run's shape kept, the task is found by its plan position (a key lookup);
	// without, by its id (a scan of the run's rows).
	sh, _, _ := s.shapes.get(ctx, run.ID, run.Total, shapeWait)
	row, err := s.taskRow(ctx, run.ID, r.PathValue("task"), sh)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if row.Dispatches, err = s.src.Runs.Attempts(ctx, run.ID, row.Index); err != nil {
		s.fail(w, r, err)
		return
	}
	v := taskView{Run: run, Task: withShape(row, sh)}
	v.PlanLearn = v.Task.Learn
	if sh != nil {
		products, err := s.products(ctx, run.ID, sh, []orch.TaskRow{row})
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if p, ok := products[row.Index]; ok {
			v.Task.Product = p
		}
	}
	known := []string{run.Repo}
	if id := v.Task.DispatchID; id != "" {
		if rec, err := s.src.Dispatches.Get(ctx, id); err == nil {
			v.Dispatch = s.dispatchDetail(ctx, rec)
			known = append(known, rec.Repo)
			v.Task.Learn = v.Task.Learn || rec.Learn // a target's mode: learn
		}
	}
	s.page(w, r, "task", "Task "+v.Task.ID, "runs", v, known...)
}

func (s *Server) taskRow(ctx context.Context, runID, taskID string, sh *shape) (orch.TaskRow, error) {
	if sh != nil {
		if i, ok := sh.index[taskID]; ok {
			rows, err := s.src.Runs.TasksAt(ctx, runID, []int{int(i)})
			if err == nil && len(rows) == 1 && rows[0].ID == taskID {
				return rows[0], nil
			}
		}
	}
	return s.src.Runs.Task(ctx, runID, taskID)
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
	var ids []string
	for _, d := range recs {
		ids = append(ids, d.ID)
		if d.ParentID != "" {
			ids = append(ids, d.ParentID)
		}
	}
	inRun, err := s.src.Runs.AttemptRuns(r.Context(), ids)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	rows := []dispatchRow{}
	var repos []string
	for _, d := range recs {
		if inRun[d.ID] == "" && (d.ParentID == "" || inRun[d.ParentID] == "") {
			rows = append(rows, dispatchRow{Record: d, Elapsed: elapsed(d, s.now())})
			repos = append(repos, d.Repo)
		}
	}
	s.page(w, r, "dispatches", "Dispatches", "dispatches", rows, repos...)
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

// inRun reports whether rec is an attempt of a run, or a child of one.
func (s *Server) inRun(ctx context.Context, rec *dispatch.Record) (bool, error) {
	ids := []string{rec.ID}
	if rec.ParentID != "" {
		ids = append(ids, rec.ParentID)
	}
	runs, err := s.src.Runs.AttemptRuns(ctx, ids)
	return len(runs) > 0, err
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
		if repo, ok := recs[i].Details[entry.KeyRepo].(string); ok {
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
	rows, err := s.listRuns(r.Context(), r.URL.Query().Get("state"), pageFresh)
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

// Tasks of one answer of /api/runs/RUN: the rest are read with ?from=N (the answer's next).
const (
	apiTaskPage    = 1000
	maxAPITaskPage = 5000
)

// runAnswer is /api/runs/RUN: the run with one page of its tasks, from plan position from;
// next is where the next page starts, 0 after the last.
type runAnswer struct {
	api.Run
	From int `json:"from"`
	Next int `json:"next,omitempty"`
}

func (s *Server) apiRun(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	run, err := s.runSummary(ctx, r.PathValue("run"), pageFresh)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.addQueueState(ctx, &run)
	q := r.URL.Query()
	from, _ := strconv.Atoi(q.Get("from"))
	from = max(from, 0)
	limit, err := strconv.Atoi(q.Get("limit"))
	if err != nil || limit <= 0 {
		limit = apiTaskPage
	}
	limit = min(limit, maxAPITaskPage)
	rows, err := s.src.Runs.Tasks(ctx, run.ID, from, limit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	sh, _, _ := s.shapes.get(ctx, run.ID, run.Total, shapeWait)
	out := runAnswer{Run: run, From: from}
	out.Tasks = []api.Task{}
	if len(rows) > 0 {
		attempts, err := s.src.Runs.AttemptsIn(ctx, run.ID, rows[0].Index, rows[len(rows)-1].Index)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		products, err := s.products(ctx, run.ID, sh, rows)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		for _, t := range rows {
			t.Dispatches = attempts[t.Index]
			task := withShape(t, sh)
			if p, ok := products[t.Index]; ok {
				task.Product = p
			}
			out.Tasks = append(out.Tasks, task)
		}
	}
	if len(rows) == limit && from+limit < run.Total {
		out.Next = from + limit
	}
	writeJSON(w, masked(out, s.mask(ctx, run.Repo)))
}

func (s *Server) apiDispatch(w http.ResponseWriter, r *http.Request) {
	rec, err := s.src.Dispatches.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, masked(rec, s.mask(r.Context(), rec.Repo)))
}
