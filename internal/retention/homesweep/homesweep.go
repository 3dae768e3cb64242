// Package homesweep is a home's retention, as agora gc runs it once and a serve (agora orch
// serve, agora mcp) every hour: the retention.Sweeper over agora.db, orch.db and the blob
// store, and the prune of the home's replica generations under replicate.keep_generations,
// each recorded on the audit log before anything is deleted.
package homesweep

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/retention"
	"github.com/agora-dev/agora/internal/store"
)

// Sweeper is the sweeper of h under pol, its entries stamped by now: orch.db is opened for writing (migrated, full
// sync, as serve opens it) only when a sweep has runs to purge.
func Sweeper(h *home.Home, pol config.RetentionPolicy, now func() time.Time) *retention.Sweeper {
	path := filepath.Join(h.Dir, home.OrchDir, home.OrchDB)
	return &retention.Sweeper{DB: h.DB, OrchDB: path, Blobs: h.Blobs, Policy: pol, Log: audit.New(now), Now: now,
		OpenOrch: func(ctx context.Context) (*store.DB, error) {
			return store.Open(ctx, path, orch.Migrations(), store.FullSync())
		}}
}

// Interval is how often a serve sweeps (the first sweep is at start).
const Interval = time.Hour

// Background is a serve's sweep of h until ctx ends (`orch serve`, `mcp`; with leader: only
// the leading orch serve, see internal/cli/gc): nothing without retention in agora.yaml. A sweep that purged, finished or left
// something is logged; a failed one is a warning and the next hour's sweep tries again.
func Background(ctx context.Context, h *home.Home, now func() time.Time, log *slog.Logger) {
	var wg sync.WaitGroup
	defer wg.Wait()
	if h.Config.Replicate.KeepGenerations > 0 {
		wg.Go(func() { prune(ctx, h, now, log) })
	}
	pol, err := h.Config.Retention.Policy()
	if err != nil {
		log.Warn("retention sweep off", "err", err)
		return
	}
	s := Sweeper(h, pol, now)
	s.Background(ctx, Interval, func(_ *retention.Plan, res retention.Result, err error) {
		if err != nil {
			log.Warn("retention sweep", "err", err)
			return
		}
		if res.Recorded > 0 || res.Finished > 0 || res.Deferred > 0 || res.Runs > 0 {
			log.Info("retention sweep", "purged", res.Recorded, "bytes", res.Bytes, "deleted", res.Deleted,
				"finished", res.Finished, "deferred", res.Deferred, "kept", res.KeptAgain,
				"runs", res.Runs, "run_tasks", res.RunTasks, "runs_skipped", res.RunsSkipped)
		}
		for _, why := range res.Refused {
			log.Warn("retention sweep left a blob in place", "why", why)
		}
	})
}
