package retention

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"time"

	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/digest"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// Item is one product of an ended dispatch that has aged out and that nothing still needs.
type Item struct {
	Dispatch string        `json:"dispatch"`
	Product  string        `json:"product"`
	Class    string        `json:"class"` // blobs or logs
	Digest   digest.Digest `json:"digest"`
	Size     int64         `json:"size"`
	EndedAt  time.Time     `json:"ended_at"`
}

// pending is a purge recorded by an earlier sweep whose blob may still be there.
type pending struct {
	Dispatch, Product string
	Digest            digest.Digest
}

// Plan is what a sweep would do, computed from one read of agora.db (and orch.db).
type Plan struct {
	Policy config.RetentionPolicy
	Now    time.Time
	// NotAfter: a blob written or re-stored at or after it is never deleted, whatever the
	// records say: a live dispatch may have stored it and not recorded it yet. It is the
	// earlier of the sweep's start and the oldest live dispatch's creation, less a minute.
	NotAfter time.Time
	Items    []Item
	// Runs are the orchestrator runs retention.runs removes from orch.db; RunsKept counts
	// those old enough that are kept, and why.
	Runs     []RunItem
	RunsKept RunsKept
	pending  []pending
	keep     map[digest.Digest]bool
}

// Bytes is the total size the plan's items record.
func (p *Plan) Bytes() int64 {
	var n int64
	for _, it := range p.Items {
		n += it.Size
	}
	return n
}

// Pending is the number of recorded purges an earlier sweep did not finish.
func (p *Plan) Pending() int { return len(p.pending) }

// ended reports whether a dispatch in state s holds final products: it has ended, and not
// in needs_input, which an answer resumes and whose input it reads again (it is waiting).
func ended(s string) bool {
	return lifecycle.DispatchEnded(s) && s != lifecycle.DispatchNeedsInput
}

// slack is subtracted from NotAfter: clocks of the host's processes agree, a file system's
// timestamps may be coarse.
const slack = time.Minute

type row struct {
	id, state, created, endedAt, parent, input, result, inputs, other string
	run                                                               string // the orch run it is an attempt of, or ""
}

// MakePlan reads agora.db (db) and, when given, orch.db (orchDB) and lists what policy purges at
// now. Kept, whatever its age: every blob a dispatch that is live, waiting (needs_input), or
// part of a run that has not ended names, or the parent of a live one; every blob a dispatch
// names whose dates do not parse, are zero or lie in the future; every catalog blob; and a
// digest any kept record names, so a blob an old and a new dispatch share (content
// addressing) stays while the new one needs it.
func MakePlan(ctx context.Context, db, orchDB *sql.DB, policy config.RetentionPolicy, now time.Time) (*Plan, error) {
	now = now.UTC()
	p := &Plan{Policy: policy, Now: now, NotAfter: now.Add(-slack), keep: map[digest.Digest]bool{}}
	liveRun, unfolded, err := liveRunAttempts(ctx, orchDB)
	if err != nil {
		return nil, err
	}
	var all []row
	rows, err := db.QueryContext(ctx, `SELECT id, state, created_at, ended_at, parent_id, input_digest, result, inputs,
		subagent_digest || ' ' || envs || ' ' || workspace, run_id FROM dispatches`)
	if err != nil {
		return nil, fmt.Errorf("read dispatches: %w", err)
	}
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.id, &r.state, &r.created, &r.endedAt, &r.parent, &r.input, &r.result, &r.inputs, &r.other, &r.run); err != nil {
			rows.Close()
			return nil, err
		}
		all = append(all, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	// A live dispatch keeps its parent whole: an answer's resume reads the parent's input.
	keepWhole := map[string]bool{}
	for _, r := range all {
		// An attempt of a run a waiting row log record names may be in that record alone.
		if !ended(r.state) || liveRun[r.id] || unfolded.holds(r.run) {
			keepWhole[r.id] = true
			if r.parent != "" {
				keepWhole[r.parent] = true
			}
			if c, err := time.Parse(time.RFC3339Nano, r.created); err == nil && c.Add(-slack).Before(p.NotAfter) {
				p.NotAfter = c.UTC().Add(-slack)
			}
		}
	}
	recorded, err := p.readRecorded(ctx, db)
	if err != nil {
		return nil, err
	}
	var cands []Item
	for _, r := range all {
		digestsIn(p.keep, r.other)
		endedAt, dateErr := time.Parse(time.RFC3339Nano, r.endedAt)
		prods, err := products(r.input, r.result, r.inputs)
		if err != nil || keepWhole[r.id] || dateErr != nil || endedAt.IsZero() || endedAt.After(now) {
			digestsIn(p.keep, r.input, r.result, r.inputs)
			continue
		}
		for _, pr := range prods {
			age := policy.Blobs
			if pr.Class == ClassLogs {
				age = policy.Logs
			}
			if age <= 0 || now.Sub(endedAt) < age {
				p.keep[pr.Digest] = true
				continue
			}
			if recorded[r.id+"\x00"+pr.Name] {
				continue
			}
			cands = append(cands, Item{Dispatch: r.id, Product: pr.Name, Class: pr.Class, Digest: pr.Digest, Size: pr.Size, EndedAt: endedAt.UTC()})
		}
	}
	if err := p.keepCatalog(ctx, db); err != nil {
		return nil, err
	}
	for _, it := range cands {
		if !p.keep[it.Digest] {
			p.Items = append(p.Items, it)
		}
	}
	sort.SliceStable(p.Items, func(i, j int) bool {
		if !p.Items[i].EndedAt.Equal(p.Items[j].EndedAt) {
			return p.Items[i].EndedAt.Before(p.Items[j].EndedAt)
		}
		return p.Items[i].Dispatch < p.Items[j].Dispatch
	})
	return p, nil
}

// readRecorded returns the purges already recorded, and keeps the unfinished ones to finish.
func (p *Plan) readRecorded(ctx context.Context, db *sql.DB) (map[string]bool, error) {
	rows, err := db.QueryContext(ctx, `SELECT dispatch_id, product, digest, done FROM retention_purged`)
	if err != nil {
		return nil, fmt.Errorf("read recorded purges: %w", err)
	}
	defer rows.Close()
	rec := map[string]bool{}
	for rows.Next() {
		var pe pending
		var done bool
		if err := rows.Scan(&pe.Dispatch, &pe.Product, &pe.Digest, &done); err != nil {
			return nil, err
		}
		rec[pe.Dispatch+"\x00"+pe.Product] = true
		if !done {
			p.pending = append(p.pending, pe)
		}
	}
	return rec, rows.Err()
}

// keepCatalog keeps every digest a catalog version names (its content and its files).
func (p *Plan) keepCatalog(ctx context.Context, db *sql.DB) error {
	rows, err := db.QueryContext(ctx, `SELECT digest, meta FROM catalog_versions`)
	if err != nil {
		return fmt.Errorf("read catalog: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var d, meta string
		if err := rows.Scan(&d, &meta); err != nil {
			return err
		}
		digestsIn(p.keep, d, meta)
	}
	return rows.Err()
}

// liveRunAttempts reads, in one read transaction of orchDB (nil: none), the dispatch ids of
// the attempts of runs that have not ended, and the runs orch.db's row log records not yet
// folded into its attempts table name (unfolded.go): an attempt of one of those may be in a
// record alone, so a plan keeps every dispatch of those runs whole (all of them when a record
// names its runs unreadably); serve's engine folds the records once it is idle for a moment,
// and the next sweep purges them.
func liveRunAttempts(ctx context.Context, orchDB *sql.DB) (map[string]bool, *unfolded, error) {
	live := map[string]bool{}
	if orchDB == nil {
		return live, &unfolded{}, nil
	}
	conn, err := orchDB.Conn(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("read orch.db's live runs: %w", err)
	}
	defer conn.Close()
	// DEFERRED: a read never takes the write lock (orch.db's writable pool begins IMMEDIATE).
	if _, err := conn.ExecContext(ctx, `BEGIN DEFERRED`); err != nil {
		return nil, nil, fmt.Errorf("read orch.db's live runs: %w", err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `ROLLBACK`)
	rows, err := conn.QueryContext(ctx, `SELECT a.dispatch_id FROM attempts a JOIN runs r ON r.id = a.run_id WHERE r.ended_at = ''`)
	if err != nil {
		return nil, nil, fmt.Errorf("read orch.db's live runs: %w", err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, nil, err
		}
		live[id] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	u, err := readUnfolded(ctx, conn)
	if err != nil {
		return nil, nil, err
	}
	return live, u, nil
}
