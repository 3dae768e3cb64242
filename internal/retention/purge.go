package retention

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/blob"
	"github.com/agora-dev/agora/internal/digest"
	"github.com/agora-dev/agora/internal/store"
)

// Roles of whoever purges, recorded in every retention.purged entry.
const (
	RoleSweep    = "retention-sweep" // serve's background sweep (actor "system")
	RoleOperator = "operator"        // a person running `agora gc` (actor: the OS user)
)

// Actor of serve's background sweep.
const SystemActor = "system"

// Result counts what a purge did.
type Result struct {
	Recorded  int      `json:"recorded"`          // products recorded purged (one audit entry per dispatch)
	Deleted   int      `json:"deleted"`           // blobs deleted
	Absent    int      `json:"absent"`            // blobs already gone
	Deferred  int      `json:"deferred"`          // blobs re-stored since NotAfter: left for the next sweep
	KeptAgain int      `json:"kept"`              // recorded purges whose blob is needed again: kept
	Finished  int      `json:"finished"`          // recorded purges of an earlier, interrupted sweep finished
	Bytes     int64    `json:"bytes"`             // bytes the recorded products had
	Refused   []string `json:"refused,omitempty"` // blobs left in place: not a regular file etc.

	Runs        int `json:"runs"`         // orchestrator runs purged from orch.db (one retention.run_purged entry each)
	RunsSkipped int `json:"runs_skipped"` // planned runs left: gone, changed or named by a schedule since the plan
	RunTasks    int `json:"run_tasks"`    // task rows the purged runs had
	RunAttempts int `json:"run_attempts"` // attempt rows the purged runs had
}

// Progress is told after each batch: products done of total.
type Progress func(done, total int)

// testOnlyAfterRecord, when set (by a test), runs after a batch is recorded and before its blobs are
// deleted: where a crash must leave a purge that the next sweep finishes.
var testOnlyAfterRecord func()

// batch is how many dispatches one transaction records.
const batch = 256

// Purge carries out plan: for each batch of dispatches it records the purge (rows and one
// retention.purged entry per dispatch, in one transaction), then deletes the blobs. So a
// crash leaves a recorded purge whose blobs the next sweep deletes, never a deleted blob with
// no record. It first finishes what an earlier sweep recorded and did not delete.
func Purge(ctx context.Context, db *store.DB, log *audit.Log, blobs *blob.Store, plan *Plan, actor, role string, progress Progress) (Result, error) {
	var res Result
	if err := finish(ctx, db, blobs, plan, &res); err != nil {
		return res, err
	}
	var groups [][]Item
	for i := 0; i < len(plan.Items); {
		j := i
		for j < len(plan.Items) && plan.Items[j].Dispatch == plan.Items[i].Dispatch {
			j++
		}
		groups = append(groups, plan.Items[i:j])
		i = j
	}
	done := 0
	for len(groups) > 0 {
		n := min(batch, len(groups))
		chunk := groups[:n]
		groups = groups[n:]
		recorded, err := record(ctx, db, log, plan, chunk, actor, role)
		if err != nil {
			return res, err
		}
		if testOnlyAfterRecord != nil {
			testOnlyAfterRecord()
		}
		var ds []pending
		for _, g := range recorded {
			for _, it := range g {
				res.Recorded++
				res.Bytes += it.Size
				ds = append(ds, pending{Dispatch: it.Dispatch, Product: it.Product, Digest: it.Digest})
			}
		}
		if err := remove(ctx, db, blobs, plan, ds, &res); err != nil {
			return res, err
		}
		for _, g := range chunk {
			done += len(g)
		}
		if progress != nil {
			progress(done, len(plan.Items))
		}
	}
	return res, nil
}

// record writes chunk's rows and audit entries in one transaction, and returns the chunk as
// recorded: a product another process's sweep recorded meanwhile (serve's and `agora gc` at
// once) is left out, so no purge is recorded twice.
func record(ctx context.Context, db *store.DB, log *audit.Log, plan *Plan, chunk [][]Item, actor, role string) ([][]Item, error) {
	at := plan.Now.Format(time.RFC3339Nano)
	var recorded [][]Item
	err := db.Tx(ctx, func(tx *sql.Tx) error {
		recorded = recorded[:0]
		seen, err := tx.PrepareContext(ctx, `SELECT count(*) FROM retention_purged WHERE dispatch_id = ? AND product = ?`)
		if err != nil {
			return err
		}
		defer seen.Close()
		entries := make([]audit.Entry, 0, len(chunk))
		for _, g := range chunk {
			var left []Item
			for _, it := range g {
				var n int
				if err := seen.QueryRowContext(ctx, it.Dispatch, it.Product).Scan(&n); err != nil {
					return err
				}
				if n == 0 {
					left = append(left, it)
				}
			}
			if len(left) == 0 {
				continue
			}
			recorded = append(recorded, left)
			entries = append(entries, purgeEntry(plan, left, actor, role))
		}
		if len(entries) == 0 {
			return nil
		}
		first, err := log.AppendAll(ctx, tx, entries)
		if err != nil {
			return err
		}
		ins, err := tx.PrepareContext(ctx, `INSERT INTO retention_purged(dispatch_id, product, digest, class, audit_seq, purged_at) VALUES (?, ?, ?, ?, ?, ?)`)
		if err != nil {
			return err
		}
		defer ins.Close()
		for i, g := range recorded {
			for _, it := range g {
				if _, err := ins.ExecContext(ctx, it.Dispatch, it.Product, string(it.Digest), it.Class, first+int64(i), at); err != nil {
					return fmt.Errorf("record purge of %s %s: %w", it.Dispatch, it.Product, err)
				}
			}
		}
		return nil
	})
	return recorded, err
}

// purgeEntry is the retention.purged entry of one dispatch's products g.
func purgeEntry(plan *Plan, g []Item, actor, role string) audit.Entry {
	prods := make([]any, 0, len(g))
	reasons := map[string]any{}
	for _, it := range g {
		prods = append(prods, map[string]any{entry.KeyProduct: it.Product, entry.KeyDigest: string(it.Digest), entry.KeyClass: it.Class, entry.KeySize: it.Size})
		age := plan.Policy.Blobs
		if it.Class == ClassLogs {
			age = plan.Policy.Logs
		}
		reasons[it.Class] = fmt.Sprintf("retention.%s %dd: ended %s, %dd before %s", it.Class,
			int64(age/(24*time.Hour)), it.EndedAt.Format(time.RFC3339), int64(plan.Now.Sub(it.EndedAt)/(24*time.Hour)), plan.Now.Format(time.RFC3339))
	}
	return audit.Entry{Actor: actor, Kind: entry.RetentionPurged, Subject: entry.Dispatch(g[0].Dispatch),
		Details: map[string]any{entry.KeyRole: role, entry.KeyProducts: prods, entry.KeyWhy: reasons}}
}

// finish completes the purges an earlier sweep recorded and did not finish.
func finish(ctx context.Context, db *store.DB, blobs *blob.Store, plan *Plan, res *Result) error {
	if len(plan.pending) == 0 {
		return nil
	}
	before := res.Deleted + res.Absent + res.KeptAgain
	if err := remove(ctx, db, blobs, plan, plan.pending, res); err != nil {
		return err
	}
	res.Finished = res.Deleted + res.Absent + res.KeptAgain - before
	return nil
}

// remove deletes the blobs of recorded purges ps and marks them done. A blob the plan keeps
// (needed again since it was recorded) is not deleted; one re-stored since plan.NotAfter is
// left, not done, for the next sweep.
func remove(ctx context.Context, db *store.DB, blobs *blob.Store, plan *Plan, ps []pending, res *Result) error {
	outcome := map[digest.Digest]bool{} // digest -> done
	for _, pe := range ps {
		if _, seen := outcome[pe.Digest]; seen {
			continue
		}
		// A leader's sweep deletes shared objects (blobs.s3): each delete asks the process's
		// fence first, as each commit does, so an old leader stops deleting once it no longer
		// leads. The recorded purge stays pending; whoever leads finishes it or keeps the blob.
		if err := store.CheckFence(); err != nil {
			return fmt.Errorf("delete %s: %w", pe.Digest, err)
		}
		if plan.keep[pe.Digest] {
			if err := blobs.Restore(pe.Digest); err != nil {
				return err
			}
			res.KeptAgain++
			outcome[pe.Digest] = true
			continue
		}
		gone, err := blobs.Purge(ctx, pe.Digest, plan.NotAfter)
		switch {
		case errors.Is(err, blob.ErrFresh):
			res.Deferred++
			outcome[pe.Digest] = false
		case errors.Is(err, blob.ErrNotRegular):
			res.Refused = append(res.Refused, err.Error())
			outcome[pe.Digest] = false
		case err != nil:
			return err
		case gone:
			res.Deleted++
			outcome[pe.Digest] = true
		default:
			res.Absent++
			outcome[pe.Digest] = true
		}
	}
	return db.Tx(ctx, func(tx *sql.Tx) error {
		up, err := tx.PrepareContext(ctx, `UPDATE retention_purged SET done = 1 WHERE dispatch_id = ? AND product = ?`)
		if err != nil {
			return err
		}
		defer up.Close()
		for _, pe := range ps {
			if outcome[pe.Digest] {
				if _, err := up.ExecContext(ctx, pe.Dispatch, pe.Product); err != nil {
					return err
				}
			}
		}
		return nil
	})
}
