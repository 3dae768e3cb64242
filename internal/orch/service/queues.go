package service

import (
	"context"
	"net/http"

	"github.com/agora-dev/agora/internal/orch/api"
)

// queues answers every queue with its concurrency, running tasks and depth.
func (s *Server) queues(w http.ResponseWriter, r *http.Request) {
	qs, err := s.Engine.Queues(r.Context())
	if err != nil {
		writeEngineErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.Queues{Queues: qs})
}

// addQueueState adds the run's queue as the engine holds it now. A run whose status could be
// read but whose queue could not (the engine is stopping) is answered without it.
func (s *Server) addQueueState(ctx context.Context, run *api.Run) {
	qs, err := s.Engine.Queues(ctx)
	if err != nil {
		return
	}
	for i := range qs {
		if qs[i].Name == run.Queue {
			run.QueueState = &qs[i]
			return
		}
	}
}
