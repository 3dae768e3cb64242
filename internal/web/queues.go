package web

import (
	"context"
	"sort"

	"github.com/agora-dev/agora/internal/compute/warm"

	"github.com/agora-dev/agora/internal/orch/api"
)

// queues lists the queues, or nil when the view has none to show (no source, or the engine
// did not answer: the page still shows the runs).
func (s *Server) queues(ctx context.Context) []api.Queue {
	if s.src.Queues == nil {
		return nil
	}
	qs, err := s.src.Queues(ctx)
	if err != nil {
		return nil
	}
	return qs
}

// addQueueState gives run its queue as the engine holds it now, when the view has queues.
func (s *Server) addQueueState(ctx context.Context, run *api.Run) {
	for _, q := range s.queues(ctx) {
		if q.Name == run.Queue {
			run.QueueState = &q
			return
		}
	}
}

// warmSlots are the warm targets' slots as serve holds them now, by target name.
func (s *Server) warmSlots() []warm.Counts {
	if s.src.Warm == nil {
		return nil
	}
	cs := s.src.Warm()
	sort.Slice(cs, func(i, j int) bool { return cs[i].Target < cs[j].Target })
	return cs
}
