package retention_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"

	"github.com/agora-dev/agora/internal/retention"
)

// benchRuns is a home whose orch.db holds n sealed runs of tasks tasks each (one attempt per
// task), all ended 200 days ago, with their submitted and sealed entries.
func benchRuns(b *testing.B, n, tasks int) (*testHome, *orchHome) {
	h := newHome(b)
	o := h.orchDB(b)
	for i := range n {
		o.add(b, orun{id: fmt.Sprintf("r%05d", i), ended: ago(200), sealed: true, tasks: tasks})
	}
	return h, o
}

// BenchmarkGCRuns: purging 1,000 runs of 10 tasks each (`agora gc` under retention.runs 180d),
// its dry run, the floor (the same rows deleted in one transaction, with no plan, re-read or
// audit entry), and the baseline of the same run: the blobs purge of 1,000 dispatches.
//
//	go test -run '^$' -bench 'BenchmarkGCRuns' -benchtime 1x -count 3 -benchmem ./internal/retention
func BenchmarkGCRuns(b *testing.B) {
	const runs, tasks = 1000, 10
	for _, mode := range []string{"blobs-baseline", "delete-floor", "dry-run", "gc"} {
		b.Run(fmt.Sprintf("%s/runs=%d", mode, runs), func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				ctx := context.Background()
				if mode == "blobs-baseline" {
					h, _ := benchHome(b, runs)
					b.StartTimer()
					if _, res, err := h.sweeper(policy).Run(ctx, "alice", retention.RoleOperator, nil); err != nil || res.Deleted != 2*runs {
						b.Fatalf("gc: %v, %+v", err, res)
					}
					continue
				}
				h, o := benchRuns(b, runs, tasks)
				s := h.sweeper(runsPolicy)
				b.StartTimer()
				switch mode {
				case "delete-floor":
					err := o.db.Tx(ctx, func(tx *sql.Tx) error {
						for _, q := range []string{`DELETE FROM attempts`, `DELETE FROM tasks`, `DELETE FROM run_extensions`, `DELETE FROM run_plans`, `DELETE FROM runs`} {
							if _, err := tx.Exec(q); err != nil {
								return err
							}
						}
						return nil
					})
					if err != nil {
						b.Fatal(err)
					}
				case "dry-run":
					if p, err := s.Plan(ctx); err != nil || len(p.Runs) != runs {
						b.Fatalf("plan: %v", err)
					}
				case "gc":
					if _, res, err := s.Run(ctx, "alice", retention.RoleOperator, nil); err != nil || res.Runs != runs || res.RunTasks != runs*tasks {
						b.Fatalf("gc: %v, %+v", err, res)
					}
				}
			}
		})
	}
}
