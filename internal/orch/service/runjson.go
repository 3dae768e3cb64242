package service

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"

	"github.com/agora-dev/agora/internal/orch/api"
)

// A run's status holds every task's view: at 100,000 tasks the views are tens of MB. So a run
// is never built whole to be written: its tasks are encoded as the engine reads them
// ([orch.Engine.StatusEach]), one at a time, into a spool (spool.go), and the run's other
// fields after them (its counts and next step are known only once every task is read). The
// bytes decode to the same run as one piece would; the tasks come first among its fields.

// runEncoder writes one run's JSON to w: its tasks as they come (task), then the rest (end).
type runEncoder struct {
	w *bufio.Writer
	// prefix comes before the run's opening brace, suffix after its closing one.
	prefix, suffix string
	started        bool
	tasks          int
	buf            bytes.Buffer
	enc            *json.Encoder
}

func newRunEncoder(w io.Writer, prefix, suffix string) *runEncoder {
	e := &runEncoder{w: bufio.NewWriterSize(w, 64<<10), prefix: prefix, suffix: suffix}
	e.enc = json.NewEncoder(&e.buf)
	return e
}

func (e *runEncoder) begin() error {
	if e.started {
		return nil
	}
	e.started = true
	_, err := e.w.WriteString(e.prefix)
	return err
}

// task writes t, the run's next task.
func (e *runEncoder) task(t *api.Task) error {
	if err := e.begin(); err != nil {
		return err
	}
	if e.tasks == 0 {
		e.w.WriteString(`{"tasks":[`)
	} else {
		e.w.WriteByte(',')
	}
	e.tasks++
	// Each task through one buffer, its encoder's newline dropped: a watch line is one line.
	e.buf.Reset()
	if err := e.enc.Encode(t); err != nil {
		return err
	}
	_, err := e.w.Write(bytes.TrimSuffix(e.buf.Bytes(), []byte("\n")))
	return err
}

// end writes the run's fields (its Tasks are left out: they were written by task).
func (e *runEncoder) end(run api.Run) error {
	if err := e.begin(); err != nil {
		return err
	}
	run.Tasks = nil
	rest, err := json.Marshal(run)
	if err != nil {
		return err
	}
	if e.tasks > 0 {
		e.w.WriteString("]")
		if len(rest) > 2 { // more than {}
			e.w.WriteByte(',')
		}
		rest = rest[1:]
	}
	e.w.Write(rest)
	e.w.WriteString(e.suffix)
	return e.w.Flush()
}

// watchLine is the prefix of a watch line holding a run ({"run": ...}, with "lagged": true
// when lagged); "}\n" ends it.
func watchLine(lagged bool) string {
	if lagged {
		return `{"lagged":true,"run":`
	}
	return `{"run":`
}

// spoolStatus reads run ref's status into a spool in the engine's read transaction and
// returns the run (without its tasks) and the spool, which the caller writes out and closes.
// Each task whose dispatch was a learn dispatch is marked learn (docs/learn.md: the mark is
// everywhere a task is shown), a task on a target in mode: learn included: what `agora orch
// watch`, the MCP run tools and every other client of the service read (`agora orch status`
// marks it from agora.db alone); a run whose dispatches cannot be read keeps the plan's
// marks. prefix and suffix go around the run's JSON; fields, when not nil, sets the run's
// fields a route adds (written after its tasks).
func (s *Server) spoolStatus(ctx context.Context, ref, prefix, suffix string, fields func(*api.Run)) (api.Run, *spool, error) {
	sp := &spool{dir: s.Spool}
	e := newRunEncoder(sp, prefix, suffix)
	var learn map[string]bool
	run, err := s.Engine.StatusEach(ctx, ref, func(run *api.Run, t *api.Task) error {
		if e.tasks == 0 && s.LearnInRun != nil {
			learn, _ = s.LearnInRun(ctx, run.ID) // a run whose dispatches cannot be read keeps the plan's marks
		}
		if learn[t.DispatchID] {
			t.Learn = true
		}
		return e.task(t)
	})
	if err == nil {
		if fields != nil {
			fields(&run)
		}
		err = e.end(run)
	}
	if err != nil {
		sp.Close()
		return api.Run{}, nil, err
	}
	return run, sp, nil
}

// writeStatus answers with run ref's status, its queue as the engine holds it now added.
func (s *Server) writeStatus(w http.ResponseWriter, r *http.Request, ref string) {
	_, sp, err := s.spoolStatus(r.Context(), ref, "", "\n", func(run *api.Run) { s.addQueueState(r.Context(), run) })
	if err != nil {
		writeEngineErr(w, err)
		return
	}
	defer sp.Close()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	sp.WriteTo(w)
}

// sendStatus writes one watch line holding run id's status ({"run": ...}, with "lagged": true
// when lagged) and returns the run (without its tasks); nameRuns, when not 0, is the run's
// NameRuns. start is called, when not nil, before the line is written.
func (s *Server) sendStatus(ctx context.Context, w http.ResponseWriter, id string, lagged bool, nameRuns int, start func()) (api.Run, error) {
	run, sp, err := s.spoolStatus(ctx, id, watchLine(lagged), "}\n", func(run *api.Run) {
		if nameRuns != 0 {
			run.NameRuns = nameRuns
		}
	})
	if err != nil {
		return run, err
	}
	defer sp.Close()
	if start != nil {
		start()
	}
	if _, err := sp.WriteTo(w); err != nil {
		return run, err
	}
	http.NewResponseController(w).Flush()
	return run, nil
}
