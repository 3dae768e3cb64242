package web

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/agora-dev/agora/internal/agenttext"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/api"
)

// keepalive is how often an idle stream sends a comment, so proxies keep it open.
const keepalive = 15 * time.Second

// batchWindow is how long a run page's task changes wait to travel together: well inside
// the second a change may take to reach the page.
const batchWindow = 100 * time.Millisecond

// reshapeMax is the longest a stream waits between renders of rows it sent before the run's
// shape was built (see runEvents).
const reshapeMax = 30 * time.Second

// tailBytes is how much of the end of a live log a page shows.
const tailBytes = 8 << 10

type sseWriter struct {
	w http.ResponseWriter
	f http.Flusher
}

func startSSE(w http.ResponseWriter) (*sseWriter, bool) {
	f, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return nil, false
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "retry: 1000\n\n")
	f.Flush()
	return &sseWriter{w: w, f: f}, true
}

// send writes one event; JSON never holds a raw newline, so one data line carries it.
func (s *sseWriter) send(event string, v any) bool {
	b, err := json.Marshal(v)
	if err != nil {
		return false
	}
	if _, err := fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", event, jsonEscapeHidden(b)); err != nil {
		return false
	}
	s.f.Flush()
	return true
}

// runEvents streams a run's changes: a snapshot of the run (its state and counts, and the
// states and rows of the tasks the page lists, ?tasks=a,b,...) first, after subscribing so
// nothing between is missed, then the tasks that changed (batched: "tasks", their states,
// and "rows", the rows of the listed ones as the page renders them; a row rendered before the
// run's shape was ready goes again once it is), the counts at most every streamFresh, and a
// new snapshot when the run itself changes. The page reads the states of
// the tasks it draws from the graph endpoint (again on every snapshot); the stream only
// updates them, so a 100,000-task run costs a page what changes, not the run. When the page
// falls behind the stream ends, and the browser reconnects for a snapshot.
func (s *Server) runEvents(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var first api.Run
	if err := s.read(ctx, func() (err error) { first, err = s.src.Runs.Run(ctx, r.PathValue("run")); return err }); err != nil {
		s.fail(w, r, err)
		return
	}
	listed := listedTasks(r.URL.Query().Get("tasks"))
	isListed := make(map[string]bool, len(listed))
	for _, id := range listed {
		isListed[id] = true
	}
	// Rows are masked for a viewer as the page is.
	m := s.mask(ctx, first.Repo)
	total := first.Total
	events, stop := s.hub.subscribe(first.ID)
	defer stop()
	// unshaped are the listed tasks whose rows went out before the run's shape was built
	// (dropped for another run's, or rebuilt as the run grew, while one build runs at a
	// time). They are rendered again, after streamShapeWait and then waiting twice as long
	// each time (at most reshapeMax), and sent once the shape is ready, so no row keeps fewer
	// columns than a fresh load shows.
	unshaped := map[string]bool{}
	var reshape <-chan time.Time
	reshapeWait := streamShapeWait
	noteShape := func(rows map[string]string, early bool) {
		for id := range rows {
			if early {
				unshaped[id] = true
			} else {
				delete(unshaped, id)
			}
		}
		if len(unshaped) == 0 {
			reshapeWait = streamShapeWait
		} else if reshape == nil {
			reshape = time.After(reshapeWait)
			reshapeWait = min(2*reshapeWait, reshapeMax)
		}
	}
	snap := func(fresh time.Duration, withTasks bool) (snapshot, error) {
		var out snapshot
		err := s.read(ctx, func() error {
			run, err := s.runSummary(ctx, first.ID, fresh)
			if err != nil {
				return err
			}
			out = snapshot{State: run.State, Counts: run.Counts, Total: run.Total}
			total = run.Total
			return nil
		})
		if err != nil || !withTasks || len(listed) == 0 {
			return out, err
		}
		tasks, rows, early, err := s.listedRows(ctx, first.ID, total, listed, m)
		noteShape(rows, early)
		out.Tasks, out.Rows = map[string]string{}, rows
		for _, t := range tasks {
			out.Tasks[t.ID] = t.State
		}
		return out, err
	}
	cur, err := snap(0, true)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	sw, ok := startSSE(w)
	if !ok {
		return
	}
	if !sw.send("snapshot", cur) {
		return
	}
	tick := time.NewTicker(keepalive)
	defer tick.Stop()
	// Task changes are batched for batchWindow: one write per page per window however many
	// tasks changed, so a busy run costs each page a few writes a second, not one per event.
	pending := map[string]string{}
	var flush, recount <-chan time.Time
	sendPending := func() bool {
		flush = nil
		if len(pending) == 0 {
			return true
		}
		var changed []string
		for id := range pending {
			if isListed[id] {
				changed = append(changed, id)
			}
		}
		ok := sw.send("tasks", pending)
		pending = map[string]string{}
		if recount == nil {
			recount = time.After(streamFresh)
		}
		if !ok || len(changed) == 0 {
			return ok
		}
		// The listed rows that changed, read after their events were committed: what a
		// fresh load shows now.
		_, rows, early, err := s.listedRows(ctx, first.ID, total, changed, m)
		noteShape(rows, early)
		return err == nil && sw.send("rows", rows)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if _, err := fmt.Fprint(w, ": keepalive\n\n"); err != nil {
				return
			}
			sw.f.Flush()
		case <-flush:
			if !sendPending() {
				return
			}
		case <-reshape:
			reshape = nil
			ids := slices.Collect(maps.Keys(unshaped))
			clear(unshaped)
			_, rows, early, err := s.listedRows(ctx, first.ID, total, ids, m)
			if err != nil {
				return
			}
			noteShape(rows, early)
			if !early && !sw.send("rows", rows) {
				return
			}
		case <-recount:
			recount = nil
			next, err := snap(streamFresh, false)
			if err != nil || !sw.send("snapshot", next) {
				return
			}
		case ev, ok := <-events:
			if !ok {
				return
			}
			if ev.Task != "" {
				pending[ev.Task] = ev.State
				if flush == nil {
					flush = time.After(batchWindow)
				}
				continue
			}
			if !sendPending() {
				return
			}
			next, err := snap(0, true)
			if err != nil || !sw.send("snapshot", next) {
				return
			}
		}
	}
}

// snapshot is a run as its page's stream says it: its state and how many tasks are in each
// state, and the states of the tasks the page lists (never every task) with their rows as
// the page renders them (listedRows).
type snapshot struct {
	State  string            `json:"state"`
	Counts map[string]int    `json:"counts"`
	Total  int               `json:"total"`
	Tasks  map[string]string `json:"tasks,omitempty"`
	Rows   map[string]string `json:"rows,omitempty"`
}

// maxListed bounds the tasks a stream's snapshot reports (a page lists taskPage).
const maxListed = 2 * taskPage

// listedTasks reads ?tasks=a,b,... (at most maxListed ids).
func listedTasks(q string) []string {
	if q == "" {
		return nil
	}
	ids := strings.Split(q, ",")
	return ids[:min(len(ids), maxListed)]
}

// tailState is what a dispatch page shows live.
type tailState struct {
	State     string `json:"state"`
	Phase     string `json:"phase,omitempty"`
	Stdout    string `json:"stdout"`
	Stderr    string `json:"stderr"`
	ElapsedMS int64  `json:"elapsed_ms"`
}

// dispatchTail streams a running dispatch's state, phase and the ends of its stdout and
// stderr every tick while something changed, and "end" once it is terminal.
func (s *Server) dispatchTail(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var first *dispatch.Record
	err := s.read(r.Context(), func() (err error) { first, err = s.src.Dispatches.Get(r.Context(), id); return err })
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// The page shows the logs as text: masked for a viewer and escaped before they travel.
	m := s.mask(r.Context(), first.Repo)
	shown := func(b []byte) string { return agenttext.Escape(tailShown(b, tailBytes, m)) }
	sw, ok := startSSE(w)
	if !ok {
		return
	}
	var last tailState
	tick := time.NewTicker(s.tailTick)
	defer tick.Stop()
	for {
		var rec *dispatch.Record
		if err := s.read(r.Context(), func() (err error) { rec, err = s.src.Dispatches.Get(r.Context(), id); return err }); err != nil {
			return
		}
		cur := tailState{State: rec.State, Phase: rec.Phase, ElapsedMS: elapsed(rec, s.now()).Milliseconds()}
		if s.src.Live != nil {
			l := s.src.Live(id)
			cur.Stdout, cur.Stderr = shown(l.Stdout), shown(l.Stderr)
		}
		if cur.State != last.State || cur.Phase != last.Phase || cur.Stdout != last.Stdout || cur.Stderr != last.Stderr {
			if !sw.send("tail", cur) {
				return
			}
			last = cur
		}
		if lifecycle.DispatchEnded(rec.State) {
			sw.send("end", map[string]string{"state": rec.State})
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		}
	}
}

// elapsed is how long a dispatch has run (or ran).
func elapsed(r *dispatch.Record, now time.Time) time.Duration {
	start := r.CreatedAt
	if r.StartedAt != nil {
		start = *r.StartedAt
	}
	end := now
	if r.EndedAt != nil {
		end = *r.EndedAt
	}
	if end.Before(start) {
		return 0
	}
	return end.Sub(start)
}
