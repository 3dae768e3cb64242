package cli

import (
	"context"
	"log/slog"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/dispatch/detach"
)

// warmSupervisors are a serve's detached supervisors (orch serve, mcp serve), holding the
// standby supervisors of d's warm local targets when this process can (root). The
// returned func discards the standbys not yet claimed; claimed ones run on.
func warmSupervisors(ctx context.Context, d *dispatch.Dispatcher, log *slog.Logger) (*detach.Supervisors, func(), error) {
	sup := detach.For(d)
	sb, err := detach.NewStandbys(ctx, d, log)
	if err != nil {
		return nil, nil, err
	}
	if sb == nil {
		return sup, func() {}, nil
	}
	sup.Standbys = sb
	return sup, sb.Close, nil
}
