package cli

import (
	"context"
	"log/slog"
	"sync"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/retention/homesweep"
)

// homeDuties is the factory's HomeDuties: agora.db replicated to replicate.s3 (unless a serve
// already does: each database has one replicator at a time) and retention's hourly sweep while
// a server runs. With leader: only the leading orch serve replicates and purges: this home may
// be a standby's or a fenced old leader's, and its replica would become the bucket's newest
// generation, the one the next takeover restores.
func homeDuties(ctx context.Context, f *cmdutil.Factory, h *home.Home, log *slog.Logger) (stop func(), err error) {
	if h.Config.Leader.Set() {
		return func() {}, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	_, waitRepl, err := startReplication(ctx, h, log, agoraReplica(h))
	if err != nil {
		cancel()
		return nil, err
	}
	var wg sync.WaitGroup
	wg.Go(func() { homesweep.Background(ctx, h, f.Now, log) })
	return func() {
		cancel()
		wg.Wait()
		waitRepl()
	}, nil
}
