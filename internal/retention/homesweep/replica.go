package homesweep

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/replicate"
	"github.com/agora-dev/agora/internal/retention"
	"github.com/agora-dev/agora/internal/store"
)

// PruneReplicas applies replicate.keep_generations to h's replica (nothing when it or
// replicate.s3 is unset): each database's generations older than the newest kept whole ones
// are planned, then (unless dryRun) recorded, one retention.replica_pruned entry each in one
// agora.db transaction, and only then deleted, each delete asking the process's fence.
// Generations recorded and not deleted (a kill in between) are planned, recorded and deleted
// again by the next sweep. Another home's generations on the same prefix are never removed:
// each comes back in foreign, said as a warning (replicate/owner.go).
func PruneReplicas(ctx context.Context, h *home.Home, now func() time.Time, dryRun bool, actor, role string) (out []replicate.PrunedGeneration, foreign []string, err error) {
	out = []replicate.PrunedGeneration{}
	rc := h.Config.Replicate
	if rc.S3 == nil || rc.KeepGenerations == 0 {
		return out, nil, nil
	}
	c, err := home.S3Client(h.Config, rc.S3)
	if err != nil {
		return out, nil, fmt.Errorf("replicate.s3: %w", err)
	}
	pub, err := os.ReadFile(filepath.Join(h.Dir, home.AuditPubFile))
	if err != nil {
		return out, nil, fmt.Errorf("prune the replica: read the home's audit key (its identity in the bucket): %w", err)
	}
	secret, err := os.ReadFile(filepath.Join(h.Dir, home.SecretKeyFile))
	if err != nil {
		return out, nil, fmt.Errorf("prune the replica: read the home's secret key (it authenticates the replica): %w", err)
	}
	for _, db := range home.ReplicaDBs {
		o := replicate.PruneOptions{Client: c, DB: db, Identity: strings.TrimSpace(string(pub)), Key: replicate.SegmentKey(secret),
			Keep: rc.KeepGenerations, Fence: store.CheckFence}
		plan, err := replicate.PlanPrune(ctx, o)
		if err != nil {
			return out, foreign, err
		}
		out = append(out, plan.Remove...)
		for _, g := range plan.Foreign {
			foreign = append(foreign, replicate.ForeignError(c, db, o.Identity, g).Error())
		}
		if dryRun {
			continue
		}
		if err := recordLeft(ctx, now, h, db, plan.Foreign, actor, role); err != nil {
			return out, foreign, err
		}
		if len(plan.Remove) == 0 {
			continue
		}
		if err := recordPrune(ctx, now, h, plan, rc.KeepGenerations, actor, role); err != nil {
			return out, foreign, err
		}
		if _, err := replicate.Prune(ctx, o, plan); err != nil {
			return out, foreign, err
		}
	}
	return out, foreign, nil
}

// recordPrune commits plan's retention.replica_pruned entries to h's audit log.
func recordPrune(ctx context.Context, now func() time.Time, h *home.Home, plan replicate.PrunePlan, keep int, actor, role string) error {
	entries := make([]audit.Entry, 0, len(plan.Remove))
	for _, g := range plan.Remove {
		entries = append(entries, audit.Entry{Actor: actor, Kind: entry.RetentionReplicaPruned, Subject: entry.Replica(g.DB, g.Generation),
			Details: map[string]any{"db": g.DB, "generation": g.Generation, "began": g.Began.Format(time.RFC3339Nano), "segments": g.Segments,
				"kept": plan.Kept, "why": fmt.Sprintf("replicate.keep_generations %d: older than the newest %d whole generations", keep, keep), "role": role}})
	}
	return h.DB.Tx(ctx, func(tx *sql.Tx) error {
		_, err := audit.New(now).AppendAll(ctx, tx, entries)
		return err
	})
}

// recordLeft commits a retention.replica_left entry for each of db's foreign generations no
// entry records yet: the decision to leave another home's generation is said once, when a
// prune first makes it, not at every sweep.
func recordLeft(ctx context.Context, now func() time.Time, h *home.Home, db string, foreign []replicate.Owner, actor, role string) error {
	if len(foreign) == 0 {
		return nil
	}
	return h.DB.Tx(ctx, func(tx *sql.Tx) error {
		var entries []audit.Entry
		for _, g := range foreign {
			subject := entry.Replica(db, g.Generation)
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM audit_entries WHERE kind = ? AND subject = ?`,
				entry.RetentionReplicaLeft, subject).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				continue
			}
			entries = append(entries, audit.Entry{Actor: actor, Kind: entry.RetentionReplicaLeft, Subject: subject,
				Details: map[string]any{"db": db, "generation": g.Generation, "claims": g.Claims, "role": role,
					"why": "not this home's: its first segment does not authenticate under this home's key as this home's (another home on the same bucket and prefix?)"}})
		}
		if len(entries) == 0 {
			return nil
		}
		_, err := audit.New(now).AppendAll(ctx, tx, entries)
		return err
	})
}

// prune prunes h's replica at start and every Interval until ctx ends, as
// serve's retention sweep does (actor system, role retention-sweep); a failed prune is a
// warning and the next one tries again.
func prune(ctx context.Context, h *home.Home, now func() time.Time, log *slog.Logger) {
	t := time.NewTicker(Interval)
	defer t.Stop()
	for {
		pruned, foreign, err := PruneReplicas(ctx, h, now, false, retention.SystemActor, retention.RoleSweep)
		if ctx.Err() != nil {
			return
		}
		for _, why := range foreign {
			log.Warn("replica prune: left another home's generation", "why", why)
		}
		if err != nil {
			log.Warn("replica prune", "err", err)
		} else if len(pruned) > 0 {
			log.Info("replica prune", "generations", len(pruned))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
