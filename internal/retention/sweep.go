package retention

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/blob"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/store"
)

// Sweeper applies a retention policy to one AGORA_HOME.
type Sweeper struct {
	DB     *store.DB   // agora.db
	OrchDB string      // path of orch.db; its live runs keep their dispatches' products
	Blobs  *blob.Store // the home's store, local or S3
	Policy config.RetentionPolicy
	Log    *audit.Log // agora.db's audit log
	Now    func() time.Time
	// OpenOrch opens orch.db (OrchDB) for writing, migrated: called only when a sweep has runs
	// to purge, so a home with no orch.db never gets one. nil: runs are planned, never purged.
	OpenOrch func(ctx context.Context) (*store.DB, error)

	mu sync.Mutex // one sweep at a time in a process
}

// Plan computes what a sweep would do now, changing nothing (`agora gc --dry-run`).
func (s *Sweeper) Plan(ctx context.Context) (*Plan, error) {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	var orch *store.DB
	if s.OrchDB != "" {
		db, err := store.OpenReadOnly(ctx, s.OrchDB)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		if err == nil {
			defer db.Close()
			orch = db
		}
	}
	if orch == nil {
		return MakePlan(ctx, s.DB.SQL(), nil, s.Policy, now())
	}
	p, err := MakePlan(ctx, s.DB.SQL(), orch.SQL(), s.Policy, now())
	if err != nil {
		return nil, err
	}
	if p.Runs, p.RunsKept, err = PlanRuns(ctx, orch.SQL(), s.Policy.Runs, p.Now); err != nil {
		return nil, err
	}
	return p, nil
}

// Run plans and purges: the products first, then the runs. The plan is returned with what
// was done.
func (s *Sweeper) Run(ctx context.Context, actor, role string, progress Progress) (*Plan, Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.Plan(ctx)
	if err != nil {
		return nil, Result{}, err
	}
	res, err := Purge(ctx, s.DB, s.Log, s.Blobs, p, actor, role, progress)
	if err != nil || len(p.Runs) == 0 {
		return p, res, err
	}
	if s.OpenOrch == nil {
		return p, res, fmt.Errorf("purge %d runs: no writer of orch.db was given", len(p.Runs))
	}
	db, err := s.OpenOrch(ctx)
	if err != nil {
		return p, res, fmt.Errorf("purge runs: %w", err)
	}
	defer db.Close()
	// orch.db's log is written as the engine writes it (sparse tree); readers see the same
	// bytes. Entries are stamped when appended (not at the plan's time), so their times never
	// run backwards past the engine's entries committed meanwhile.
	log := audit.New(s.Now).SparseTree()
	err = PurgeRuns(ctx, db, log, p.Runs, s.Policy.Runs, p.Now, actor, role, &res)
	return p, res, err
}

// Background sweeps at start and then every interval until ctx ends, as actor "system" in
// role retention-sweep; report is told each sweep's outcome. With no policy set it returns at
// once: nothing is ever purged unless agora.yaml says so.
func (s *Sweeper) Background(ctx context.Context, interval time.Duration, report func(*Plan, Result, error)) {
	if !s.Policy.Set() {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		p, res, err := s.Run(ctx, SystemActor, RoleSweep, nil)
		if ctx.Err() != nil {
			return
		}
		if report != nil {
			report(p, res, err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
