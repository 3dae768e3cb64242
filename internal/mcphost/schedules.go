package mcphost

import (
	"context"
	"encoding/json"

	"github.com/agora-dev/agora/internal/hostpath"
	"github.com/agora-dev/agora/internal/orch/api"
)

// Schedules lists the schedules: names, specs, plans by name and digest, last and next slots.
// Schedules are added and removed on the host's command line only; this port only reads.
func (o *Orchestrator) Schedules(ctx context.Context) (json.RawMessage, error) {
	list, err := o.c.Schedules(ctx)
	if err != nil {
		return nil, orchError(err)
	}
	out := api.Schedules{Schedules: make([]api.Schedule, 0, len(list))}
	for _, s := range list {
		out.Schedules = append(out.Schedules, publicSchedule(s))
	}
	return json.Marshal(out)
}

// Schedule returns one schedule with its recent runs.
func (o *Orchestrator) Schedule(ctx context.Context, name string) (json.RawMessage, error) {
	s, err := o.c.Schedule(ctx, name)
	if err != nil {
		return nil, orchError(err)
	}
	return json.Marshal(publicSchedule(s))
}

// publicSchedule is s without a host path in the reason its last slot was refused (a
// workspace that could not be resolved may name the path it looked at).
func publicSchedule(s api.Schedule) api.Schedule {
	s.LastError = hostpath.New("").HostText(s.LastError)
	return s
}
