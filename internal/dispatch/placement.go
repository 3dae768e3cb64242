package dispatch

import (
	"context"
	"fmt"

	"github.com/agora-dev/agora/internal/compute"
)

// Placement asks the provider of r's target where r's process runs (a kubernetes pod's
// phase and node, a container's state). It returns nil and no error when there is nothing to
// ask: the dispatch never got a provider task, or its provider cannot describe (local).
func (d *Dispatcher) Placement(ctx context.Context, r *Record) (*compute.Placement, error) {
	if r.ProviderTaskID == "" {
		return nil, nil
	}
	p, err := d.providerFor(ctx, r.Target)
	if err != nil {
		return nil, err
	}
	desc, ok := p.(compute.Describer)
	if !ok {
		return nil, nil
	}
	pl, err := desc.Describe(ctx, r.ProviderTaskID)
	if err != nil {
		return nil, fmt.Errorf("describe dispatch %s on target %q: %w", r.ID, r.Target, err)
	}
	return &pl, nil
}
