package dispatch

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// sweeper is a provider that can remove what it left elsewhere (a cluster's Jobs, Secrets and
// NetworkPolicies) for dispatches that have ended.
type sweeper interface {
	Sweep(ctx context.Context, terminal func(id string) bool) (int, error)
}

// SweepRemote asks every non-local target's provider that can sweep to delete what it holds
// for ended dispatches: a serve that starts after a crash finds them. A dispatch this home has
// no record of is left alone, since another agora may share the namespace. It returns how many
// dispatches were cleaned, and the first error of each target joined.
func (d *Dispatcher) SweepRemote(ctx context.Context) (int, error) {
	names := make([]string, 0, len(d.Config.Targets))
	for name, t := range d.Config.Targets {
		if t.Provider != "" && t.Provider != config.ProviderLocal {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	terminal := func(id string) bool {
		r, err := d.Records.Get(ctx, id)
		return err == nil && lifecycle.DispatchEnded(r.State)
	}
	n := 0
	var errs []error
	for _, name := range names {
		p, err := d.providerFor(ctx, name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		s, ok := p.(sweeper)
		if !ok {
			continue
		}
		c, err := s.Sweep(ctx, terminal)
		n += c
		if err != nil {
			errs = append(errs, fmt.Errorf("target %q: sweep: %w", name, err))
		}
	}
	return n, errors.Join(errs...)
}
