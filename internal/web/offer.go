package web

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/api"
)

// The run and task pages offer only the actions the engine would take: a sealed run accepts
// no change at all, so it shows neither Cancel nor Retry (a stale page that still has one is
// answered with a JSON conflict, see conflict).

// CanCancel says the run page offers Cancel run: the run is open and has not ended or been
// asked to stop.
func (v runView) CanCancel() bool {
	return !v.Run.Sealed && !v.Run.CancelAsked && !lifecycle.RunEnded(v.Run.State)
}

// CanRetry says the run page offers Retry failed tasks: the run is not sealed or cancelled
// and has a failed task.
func (v runView) CanRetry() bool {
	return !v.Run.Sealed && !v.Run.CancelAsked && v.Run.State != lifecycle.RunCancelled && v.Run.Counts[lifecycle.TaskFailed] > 0
}

// CanCancelTask says the task page offers Cancel task: its run is open and the task has not
// ended.
func (v taskView) CanCancelTask() bool {
	return !v.Run.Sealed && !v.Run.CancelAsked && !lifecycle.TaskEnded(v.Task.State)
}

// maxRetryAll bounds the failed tasks one Retry failed tasks retries.
const maxRetryAll = 1000

// retryFailed retries every failed task of the run (the engine retries one task at a time,
// and a run-level retry was refused as "retry needs a task" whatever the button said),
// stopping at the first refusal.
func (s *Server) retryFailed(r *http.Request, req api.ActionRequest) error {
	if req.Task != "" {
		return s.src.Orch.Retry(r.Context(), req)
	}
	failed, err := s.src.Runs.TasksIn(r.Context(), req.Run, lifecycle.TaskFailed, maxRetryAll)
	if err != nil {
		return err
	}
	if len(failed) == 0 {
		return s.src.Orch.Retry(r.Context(), req) // the engine says why (no task, sealed, ...)
	}
	for _, t := range failed {
		one := req
		one.Task = t.ID
		if err := s.src.Orch.Retry(r.Context(), one); err != nil {
			return err
		}
	}
	return nil
}

// conflict answers a refused action as a JSON error with one "conflict:" (the engine's
// errors start with it already): {"error": "conflict: run X is sealed ...", "code": "conflict"}.
func conflict(w http.ResponseWriter, msg string) {
	if !strings.HasPrefix(msg, "conflict: ") {
		msg = "conflict: " + msg
	}
	b, err := json.Marshal(api.Error{Error: msg, Code: "conflict"})
	if err != nil {
		http.Error(w, "the answer could not be encoded", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusConflict)
	w.Write(append(jsonEscapeHidden(b), '\n'))
}
