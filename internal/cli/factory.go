package cli

import (
	"context"
	"log/slog"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/anchor"
	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/cli/dispatchcmd"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/dispatch/detach"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/client"
	"github.com/agora-dev/agora/internal/store"
)

// NewFactory returns a factory over the given streams and environment, wired to this
// package's builders (the composition root: providers.go, dispatch_factory.go, the anchors of
// anchors.go): a command asks the factory for a dispatcher or a checkpointer and never names a
// provider or an anchor.
func NewFactory(io *cmdutil.IOStreams, getenv func(string) string) *cmdutil.Factory {
	f := cmdutil.NewFactory(io, getenv)
	f.Checkpointer = func(ctx context.Context) (*audit.Checkpointer, error) { return checkpointer(ctx, f) }
	f.Dispatcher = func(ctx context.Context) (*dispatch.Dispatcher, error) { return dispatcher(ctx, f) }
	f.Courier = func(ctx context.Context) (*dispatch.Courier, error) { return courier(ctx, f) }
	f.OrchClient = func(ctx context.Context) (*client.Client, error) { return orchClient(ctx, f) }
	f.NetworkGateway = func(ctx context.Context, listen, advertise string) (func(context.Context) error, error) {
		return networkGateway(ctx, f, listen, advertise)
	}
	f.HomeDuties = func(ctx context.Context, h *home.Home, log *slog.Logger) (func(), error) {
		return homeDuties(ctx, f, h, log)
	}
	f.S3Anchors = func(cfg *config.Config, logName string) ([]*anchor.S3, error) { return s3Anchors(cfg, logName, f.Now) }
	f.LogCheckpointer = func(ctx context.Context, db *store.DB, logName string) (*audit.Checkpointer, error) {
		return checkpointerFor(ctx, f, db, logName)
	}
	f.ServeReplication = serveReplication
	f.AgoraReplicated = agoraReplicated
	f.Handoff = func(d *dispatch.Dispatcher, sup *detach.Supervisors, h *home.Home) (api.Handoff, error) {
		return dispatchcmd.NewHandoffRunner(f, d, sup, h)
	}
	return f
}
