package container

import (
	"context"
	"fmt"

	"github.com/moby/moby/client"

	"github.com/agora-dev/agora/internal/compute/remote"
)

// Cancel kills and removes the container named by taskID ("docker:<id>"), from any
// process that reaches the same engine. A container that is already gone is not an error;
// one without the agora.dispatch label (or, for a dispatch run in a warm slot, agora.slot) is
// not agora's, and is left alone with an error.
func (p *Provider) Cancel(ctx context.Context, taskID string) error {
	id, err := parseTaskID(taskID)
	if err != nil {
		return err
	}
	ins, err := p.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if isNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cancel %q: inspect: %w", taskID, err)
	}
	// The engine resolves a name or a prefix too: insist on the full id we were given.
	if ins.Container.ID != id || ins.Container.Config == nil ||
		ins.Container.Config.Labels[LabelDispatch] == "" && !remote.ValidSlotID(ins.Container.Config.Labels[LabelSlot]) {
		return fmt.Errorf("cancel %q: not a container agora started (no %s or %s label); left alone", taskID, LabelDispatch, LabelSlot)
	}
	if err := p.kill(id); err != nil {
		return err
	}
	return p.remove(id)
}
