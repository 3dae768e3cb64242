package container

import (
	"context"
	"fmt"

	"github.com/moby/moby/client"

	"github.com/agora-dev/agora/internal/compute"
)

var _ compute.Describer = (*Provider)(nil)

// Describe reports the container's state and health from one inspect. A removed container
// (the provider removes each once it has its exit) is Placement.Gone.
func (p *Provider) Describe(ctx context.Context, taskID string) (compute.Placement, error) {
	d := compute.Placement{Provider: "docker"}
	id, err := parseTaskID(taskID)
	if err != nil {
		return d, err
	}
	d.Object = id[:12]
	ins, err := p.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if isNotFound(err) {
		d.Gone = true
		return d, nil
	}
	if err != nil {
		return d, fmt.Errorf("describe %q: inspect: %w", taskID, err)
	}
	// The engine resolves names and prefixes too: only the full id of a container agora made.
	if ins.Container.ID != id || ins.Container.Config == nil || ins.Container.Config.Labels[LabelDispatch] == "" {
		return d, fmt.Errorf("describe %q: not a container agora started (no %s label)", taskID, LabelDispatch)
	}
	if st := ins.Container.State; st != nil {
		d.Phase = string(st.Status)
		switch {
		case st.OOMKilled:
			d.Reason = "OOMKilled"
		case st.Error != "":
			d.Reason = st.Error
		}
		if st.Health != nil {
			d.Health = string(st.Health.Status)
		}
	}
	return d, nil
}
