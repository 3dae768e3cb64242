package orch_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/store"
)

// BenchmarkRunCountsTriggers is what the run_counts and run_usage triggers add to the writes
// they ride on, without them, with run_counts' alone and with all, in the same run: per task, its row inserted (a
// submit), its state changed twice (two folds' updates) and its attempt inserted whole with
// a usage (a fold), in the multi-row statement forms the engine uses (100 rows a
// statement), one transaction per 1,000 tasks, without fsync.
//
//	go test ./internal/orch -run '^$' -bench RunCountsTriggers
func BenchmarkRunCountsTriggers(b *testing.B) {
	for _, triggers := range []string{"none", "counts", "all"} {
		b.Run("triggers="+triggers, func(b *testing.B) {
			ctx := context.Background()
			db, err := store.Open(ctx, filepath.Join(b.TempDir(), "orch.db"), orch.Migrations())
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			drop := map[string][]string{"none": {"run_counts_insert", "run_counts_update", "run_counts_delete"}}
			if triggers != "all" {
				for _, t := range append(drop[triggers], "run_usage_insert", "run_usage_update_old", "run_usage_update_new", "run_usage_delete") {
					if _, err := db.SQL().Exec(`DROP TRIGGER ` + t); err != nil {
						b.Fatal(err)
					}
				}
			}
			if _, err := db.SQL().Exec(`INSERT INTO runs(id, name, digest, state, actor, created_at) VALUES ('r', 'r', 'd', 'running', 't', 'now')`); err != nil {
				b.Fatal(err)
			}
			const perTx, perStmt = 1000, 100
			usage := `{"input_tokens":1200,"output_tokens":300,"cached_tokens":0,"model_calls":2,"cost_usd":0.0042}`
			next := 0
			for b.Loop() {
				err := db.Tx(ctx, func(tx *sql.Tx) error {
					for s := 0; s < perTx; s += perStmt {
						var ins, upd, att []string
						var insArgs, upd1, upd2, attArgs []any
						for i := next + s; i < next+s+perStmt; i++ {
							ins = append(ins, `('r', ?, ?, 'pending')`)
							insArgs = append(insArgs, i, fmt.Sprintf("t%d", i))
							upd = append(upd, `(?, ?)`)
							upd1 = append(upd1, "ready", i)
							upd2 = append(upd2, "succeeded", i)
							att = append(att, `(?, 'r', ?, 1, 'succeeded', 'now', 'now', ?)`)
							attArgs = append(attArgs, fmt.Sprintf("d%d", i), i, usage)
						}
						for _, q := range []struct {
							sql  string
							args []any
						}{
							{`INSERT INTO tasks(run_id, idx, id, state) VALUES ` + strings.Join(ins, ","), insArgs},
							{`UPDATE tasks SET state = v.column1 FROM (VALUES ` + strings.Join(upd, ",") + `) AS v WHERE tasks.run_id = 'r' AND tasks.idx = v.column2`, upd1},
							{`UPDATE tasks SET state = v.column1 FROM (VALUES ` + strings.Join(upd, ",") + `) AS v WHERE tasks.run_id = 'r' AND tasks.idx = v.column2`, upd2},
							{`INSERT INTO attempts(dispatch_id, run_id, task_idx, number, state, fired_at, ended_at, usage) VALUES ` + strings.Join(att, ","), attArgs},
						} {
							if _, err := tx.ExecContext(ctx, q.sql, q.args...); err != nil {
								return err
							}
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
				next += perTx
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(next), "ns/task")
		})
	}
}
