package kubernetes

import (
	"context"
	"fmt"

	"github.com/agora-dev/agora/internal/compute"
)

var _ compute.Adopter = (*Provider)(nil)

// Adopt follows the dispatch's existing Job or Sandbox, as Start does when it finds one
// (taking back its gateway session, whose token stays the pod's and is never handed out
// again), and returns nil when the dispatch has neither: it creates nothing, exports nothing
// and deletes nothing. Cancelling ctx deletes the adopted Job, as for Start.
func (p *Provider) Adopt(ctx context.Context, s compute.Spec) (compute.Handle, error) {
	if _, err := p.checkSpec(s); err != nil {
		return nil, fmt.Errorf("adopt %q: %w", s.ID, err)
	}
	name := objectName(s.ID)
	defer p.lockStart(name)()
	return p.adopt(ctx, s, name)
}
