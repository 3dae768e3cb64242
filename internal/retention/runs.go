package retention

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// RunItem is an orchestrator run whose rows retention.runs removes from orch.db.
type RunItem struct {
	Run      string    `json:"run"`
	Name     string    `json:"name"`  // its plan's name
	State    string    `json:"state"` // succeeded, failed or cancelled
	Digest   string    `json:"plan_digest"`
	EndedAt  time.Time `json:"ended_at"`
	Tasks    int       `json:"tasks"`
	Attempts int       `json:"attempts"`
}

// RunsKept counts the ended runs old enough to go that a sweep keeps, and why.
type RunsKept struct {
	// Unsealed: failed runs that were never sealed: 'agora orch retry' may still resume them,
	// and serve's engine holds them, so only a sealed run is purged ('agora orch seal RUN').
	Unsealed int `json:"unsealed"`
	// Scheduled: runs a schedule names as its last run (orch.db schedules.last_run).
	Scheduled int `json:"scheduled"`
	// BadDate: runs whose end does not parse or lies after the sweep's clock.
	BadDate int `json:"bad_date"`
	// Unfolded: runs kept because a record of orch.db's row log not yet folded into its tasks
	// and attempts tables names them (orch's rowlog.go; unfolded.go here): a crash may have
	// left a sealed run's last rows there, which a purge would not count and the fold would
	// then drop. Runs no waiting record names are purged meanwhile.
	Unfolded int `json:"unfolded"`
	// UnfoldedRuns are their ids, oldest first.
	UnfoldedRuns []string `json:"unfolded_runs,omitempty"`
}

// PlanRuns lists the runs of orch.db (db) that policy.Runs has aged out at now: ended (a
// terminal state and an end time), sealed, ended at least policy.Runs before now, and named
// by no schedule's last run. Oldest end first. Nothing when policy.Runs is zero.
func PlanRuns(ctx context.Context, db *sql.DB, age time.Duration, now time.Time) ([]RunItem, RunsKept, error) {
	var kept RunsKept
	if age <= 0 || db == nil {
		return nil, kept, nil
	}
	now = now.UTC()
	cutoff := now.Add(-age)
	// Every ended run is read (a runs row is small; there is no index on ended_at): the
	// parsed time decides, never a text comparison of dates.
	// An orch.db that no agora with schedules has opened yet (the plan reads it without
	// migrating it) has no schedules table, and so no schedule to keep a run for.
	scheduled := `EXISTS (SELECT 1 FROM schedules s WHERE s.last_run = r.id)`
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schedules'`).Scan(&n); err != nil {
		return nil, kept, fmt.Errorf("read orch.db's schema: %w", err)
	}
	if n == 0 {
		scheduled = `0`
	}
	rows, err := db.QueryContext(ctx, `SELECT r.id, r.name, r.state, r.digest, r.ended_at, r.sealed_at, `+scheduled+`
		FROM runs r WHERE r.ended_at != ''`)
	if err != nil {
		return nil, kept, fmt.Errorf("read orch.db's ended runs: %w", err)
	}
	var out []RunItem
	for rows.Next() {
		var it RunItem
		var ended, sealed string
		var scheduled bool
		if err := rows.Scan(&it.Run, &it.Name, &it.State, &it.Digest, &ended, &sealed, &scheduled); err != nil {
			rows.Close()
			return nil, kept, err
		}
		at, err := time.Parse(time.RFC3339Nano, ended)
		switch {
		case err != nil || at.IsZero() || at.After(now):
			kept.BadDate++
		case at.After(cutoff):
		case it.Run == "" || strings.Contains(it.Run, "/"):
			// Never from the engine (ULIDs, SCHEDULE@SLOT); its entry's subject would read as
			// a path below run/, which verify refuses, so the run is left alone.
		case !utf8.ValidString(it.Run) || !utf8.ValidString(it.Name) || !utf8.ValidString(it.State) || !utf8.ValidString(it.Digest):
			// Never from the engine either (its log takes only UTF-8); the purge's entry
			// could not be written, and its batch's transaction, and every later batch, would
			// fail at each sweep, so no run would ever be purged.
		case sealed == "":
			kept.Unsealed++
		case scheduled:
			kept.Scheduled++
		default:
			it.EndedAt = at.UTC()
			out = append(out, it)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, kept, err
	}
	// Read after the runs: a sealed run gets no record after its seal, so a run no waiting
	// record names now has every row in the tables (a fold since is in them too).
	u, err := readUnfolded(ctx, db)
	if err != nil {
		return nil, kept, err
	}
	out = keepUnfolded(out, u, &kept)
	if err := countRunRows(ctx, db, out); err != nil {
		return nil, kept, err
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].EndedAt.Equal(out[j].EndedAt) {
			return out[i].EndedAt.Before(out[j].EndedAt)
		}
		return out[i].Run < out[j].Run
	})
	return out, kept, nil
}

// keepUnfolded drops from items every run a waiting row log record names, counting them in
// kept.Unfolded and naming them in kept.UnfoldedRuns.
func keepUnfolded(items []RunItem, u *unfolded, kept *RunsKept) []RunItem {
	out := items[:0]
	for _, it := range items {
		if u.holds(it.Run) {
			kept.Unfolded++
			kept.UnfoldedRuns = append(kept.UnfoldedRuns, it.Run)
			continue
		}
		out = append(out, it)
	}
	return out
}

// countRunRows fills each item's task and attempt counts (indexed by run id in both tables).
func countRunRows(ctx context.Context, db *sql.DB, items []RunItem) error {
	if len(items) == 0 {
		return nil
	}
	tasks, err := db.PrepareContext(ctx, `SELECT count(*) FROM tasks WHERE run_id = ?`)
	if err != nil {
		return err
	}
	defer tasks.Close()
	attempts, err := db.PrepareContext(ctx, `SELECT count(*) FROM attempts WHERE run_id = ?`)
	if err != nil {
		return err
	}
	defer attempts.Close()
	for i := range items {
		if err := tasks.QueryRowContext(ctx, items[i].Run).Scan(&items[i].Tasks); err != nil {
			return fmt.Errorf("count tasks of run %s: %w", items[i].Run, err)
		}
		if err := attempts.QueryRowContext(ctx, items[i].Run).Scan(&items[i].Attempts); err != nil {
			return fmt.Errorf("count attempts of run %s: %w", items[i].Run, err)
		}
	}
	return nil
}
