package orch

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/store"
)

// BenchmarkLayerFloor is the least SQL the engine's design needs for one layer of the
// layered DAG (BenchmarkLayeredDAG): 100 completions (the task's row, the attempt's end) and
// the 100 fires they ready (the task's row, the attempt's row), their 200 audit entries, and
// the run's row, in one durable transaction on a run of 10,000 task rows, with the engine's
// own prepared statements and audit appender, and nothing else: no scheduling, no plan, no
// executor, no watchers. Its time per task is what no engine built on these rows can beat on
// this machine; the parts (rows alone, audit alone, an empty commit) say where it goes.
// cpu-us/task is the process's CPU time (user and system) per task: it does not depend on
// how busy the machine is the way wall time does.
func BenchmarkLayerFloor(b *testing.B) {
	// alongside: the entries are encoded while the rows are written; sparse: the audit tree's
	// nodes are stored from level 4 up (the engine does both).
	// multi: the rows are written as the engine writes them, in
	// statements of many rows each (multirow.go), instead of one statement per row.
	for _, part := range []struct {
		name                                  string
		rows, audit, alongside, sparse, multi bool
	}{{"rows+audit", true, true, false, false, false}, {"rows", true, false, false, false, false}, {"audit", false, true, false, false, false},
		{"commit", false, false, false, false, false},
		{"rows+audit-alongside", true, true, true, false, false}, {"rows+audit-sparse", true, true, false, true, false},
		{"rows+audit-alongside-sparse", true, true, true, true, false}, {"audit-sparse", false, true, false, true, false},
		{"rows-multi", true, false, false, false, true}, {"rows+audit-alongside-sparse-multi", true, true, true, true, true},
		{"log", true, false, false, false, false}, {"log+audit-alongside-sparse", true, true, true, true, false}} {
		b.Run(part.name, func(b *testing.B) {
			f := newFloor(b)
			f.multi = part.multi
			if strings.HasPrefix(part.name, "log") {
				f.useLog(b)
			}
			if part.sparse {
				f.log = f.log.SparseTree()
			}
			ctx := context.Background()
			b.ResetTimer()
			cpu0 := cpuTime()
			for i := 0; i < b.N; i++ {
				if err := f.layer(ctx, part.rows, part.audit, part.alongside); err != nil {
					b.Fatal(err)
				}
			}
			cpu := cpuTime() - cpu0
			tasks := float64(b.N * floorWidth)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e3/tasks, "us/task")
			b.ReportMetric(float64(cpu.Nanoseconds())/1e3/tasks, "cpu-us/task")
			b.ReportMetric(tasks/b.Elapsed().Seconds(), "tasks/s")
		})
	}
}

// floorWidth is the layer's width, the tasks one commit completes and fires.
const floorWidth = 100

type floor struct {
	db    *store.DB
	st    stmts
	log   *audit.Log
	runs  string // the run's id
	n     int    // layers written
	multi bool   // rows in statements of many rows (writeChunked)
	asLog bool   // the rows' transitions as one row per layer instead (useLog)
	args  []any
	buf   []byte
}

func newFloor(b *testing.B) *floor {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(b.TempDir(), "orch.db"), Migrations(), store.FullSync())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	f := &floor{db: db, log: audit.New(nil), runs: "01KFLOORRUN0000000000000000"}
	if err := f.st.prepare(ctx, db.SQL()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.st.close() })
	err = db.Tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO runs(id, name, digest, state, actor, created_at) VALUES (?, 'floor', 'sha256:0', 'running', 'bench', ?)`,
			f.runs, ts(time.Now())); err != nil {
			return err
		}
		ins := tx.StmtContext(ctx, f.st.insertTask)
		for i := range 100 * floorWidth {
			if _, err := ins.ExecContext(ctx, f.runs, i, taskName(i), "pending", 0, 0, "", 0, "", "", "", "", "", false); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return f
}

func taskName(i int) string { return fmt.Sprintf("l%d-%d", i/floorWidth, i%floorWidth) }

// layer commits one layer: the previous layer's tasks complete, this layer's fire. alongside
// appends the entries the way the engine does, encoding them while the rows are written
// (audit.Log.AppendAllAlongside); otherwise they are encoded and appended after the rows.
func (f *floor) layer(ctx context.Context, rows, withAudit, alongside bool) error {
	ctx = context.WithoutCancel(ctx)
	done, fired := (f.n-1)*floorWidth, f.n*floorWidth
	f.n++
	dispatch, task := floorDispatch, floorTask
	now := time.Now()
	var entries []audit.Entry
	if withAudit {
		entries = make([]audit.Entry, 0, 2*floorWidth)
		for a := done; a < done+floorWidth && a >= 0; a++ {
			entries = append(entries, audit.Entry{Actor: entry.OrchActor, Kind: entry.TaskSucceeded, Subject: entry.Task(f.runs, taskName(task(a))),
				Details: map[string]any{entry.KeyAttempt: int64(1), entry.KeyDispatchID: dispatch(a), entry.KeyRunName: "floor"}})
		}
		for a := fired; a < fired+floorWidth; a++ {
			entries = append(entries, audit.Entry{Actor: entry.OrchActor, Kind: entry.TaskFired, Subject: entry.Task(f.runs, taskName(task(a))),
				Details: map[string]any{entry.KeyAttempt: int64(1), entry.KeyDispatchID: dispatch(a), entry.KeySubagent: "worker",
					"ready_seq": int64(a), entry.KeyRunName: "floor"}})
		}
	}
	return f.db.Tx(ctx, func(tx *sql.Tx) error {
		if alongside {
			_, err := f.log.AppendAllAlongside(ctx, tx, f.st.audit, entries, func() error { return f.rows(ctx, tx, done, fired, now, rows) })
			return err
		}
		if err := f.rows(ctx, tx, done, fired, now, rows); err != nil {
			return err
		}
		if withAudit {
			if _, err := f.log.AppendAllWith(ctx, tx, f.st.audit, entries); err != nil {
				return err
			}
		}
		return nil
	})
}

// rows writes the layer's rows in tx: the run's, and when rows is set, the completions' (the
// task's row, the attempt's end) and the fires' (the task's row, the attempt's row).
func (f *floor) rows(ctx context.Context, tx *sql.Tx, done, fired int, now time.Time, rows bool) error {
	if _, err := tx.StmtContext(ctx, f.st.updateRun).ExecContext(ctx, "running", false, "", "", f.runs); err != nil {
		return err
	}
	if !rows {
		return nil
	}
	if f.multi {
		return f.rowsMulti(ctx, tx, done, fired, now)
	}
	if f.asLog {
		return f.rowsLog(ctx, tx, done, fired, now)
	}
	up, end, ins := tx.StmtContext(ctx, f.st.updateTask), tx.StmtContext(ctx, f.st.endAttempt), tx.StmtContext(ctx, f.st.insertAttempt)
	for a := done; a < done+floorWidth && a >= 0; a++ {
		if err := execOne(ctx, up, "succeeded", 1, 0, floorDispatch(a), int64(a), "", "", "", "", "", false, "", f.runs, floorTask(a)); err != nil {
			return err
		}
		if err := execOne(ctx, end, "succeeded", "", ts(now), "", "", floorDispatch(a)); err != nil {
			return err
		}
	}
	for a := fired; a < fired+floorWidth; a++ {
		if err := execOne(ctx, up, "running", 1, 0, floorDispatch(a), int64(a), "", "", "", "", "", false, "", f.runs, floorTask(a)); err != nil {
			return err
		}
		if err := execOne(ctx, ins, floorDispatch(a), f.runs, floorTask(a), 1, "", "[]", ts(now)); err != nil {
			return err
		}
	}
	return nil
}

// rowsMulti writes what rows does with the engine's multi-row statements, in the engine's
// order (task rows, attempt inserts, attempt ends).
func (f *floor) rowsMulti(ctx context.Context, tx *sql.Tx, done, fired int, now time.Time) error {
	var tasks []int // attempt numbers whose task rows change: the completions', then the fires'
	for a := max(done, 0); a < done+floorWidth && done >= 0; a++ {
		tasks = append(tasks, a)
	}
	ended := len(tasks)
	for a := fired; a < fired+floorWidth; a++ {
		tasks = append(tasks, a)
	}
	err := writeChunked(ctx, tx, &f.st.updateTasks, len(tasks), &f.args, func(dst []any, i int) []any {
		a, state := tasks[i], "running"
		if i < ended {
			state = "succeeded"
		}
		return append(dst, state, 1, 0, floorDispatch(a), int64(a), "", "", "", "", "", false, "", f.runs, floorTask(a))
	})
	if err != nil {
		return err
	}
	err = writeChunked(ctx, tx, &f.st.insertAttempts, floorWidth, &f.args, func(dst []any, i int) []any {
		return append(dst, floorDispatch(fired+i), f.runs, floorTask(fired+i), 1, "", "[]", ts(now))
	})
	if err != nil {
		return err
	}
	return writeChunked(ctx, tx, &f.st.endAttempts, ended, &f.args, func(dst []any, i int) []any {
		return append(dst, "succeeded", "", ts(now), "", "", floorDispatch(done+i))
	})
}

// useLog makes the floor write its rows' transitions as one row per layer in a table of its
// own, the least a design that keeps task and attempt state in memory, with SQLite as their
// log, must write in the commit (the next step it measures).
func (f *floor) useLog(b *testing.B) {
	f.asLog = true
	if _, err := f.db.SQL().Exec(`CREATE TABLE floor_log(batch INTEGER PRIMARY KEY, data BLOB NOT NULL)`); err != nil {
		b.Fatal(err)
	}
}

// rowsLog writes the layer's 200 transitions (a completion: the task, its new state, the
// attempt's dispatch id and end time; a fire: the same with the fire time) as one binary row.
func (f *floor) rowsLog(ctx context.Context, tx *sql.Tx, done, fired int, now time.Time) error {
	d := f.buf[:0]
	add := func(a int, state byte) {
		d = binary.AppendUvarint(d, uint64(floorTask(a)))
		d = append(d, state, 1) // state, attempt number
		d = append(d, floorDispatch(a)...)
		d = binary.BigEndian.AppendUint64(d, uint64(now.UnixNano()))
	}
	for a := max(done, 0); a < done+floorWidth && done >= 0; a++ {
		add(a, 's')
	}
	for a := fired; a < fired+floorWidth; a++ {
		add(a, 'r')
	}
	f.buf = d
	_, err := tx.ExecContext(ctx, `INSERT INTO floor_log(batch, data) VALUES (?, ?)`, f.n, d)
	return err
}

// floorDispatch is attempt k's dispatch id.
func floorDispatch(k int) string { return fmt.Sprintf("01KFLOORDISPATCH%010d", k) }

// floorTask is the index of attempt k's task: past the 100th layer the tasks come round
// again (with new attempts), so every layer updates rows that exist.
func floorTask(k int) int { return k % (100 * floorWidth) }

// execOne runs stmt and fails unless it changed exactly one row: a floor that updated nothing
// would measure less than the engine does.
func execOne(ctx context.Context, stmt *sql.Stmt, args ...any) error {
	res, err := stmt.ExecContext(ctx, args...)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("floor: %d rows changed, want 1 (%v)", n, err)
	}
	return nil
}

// ProcessCPU is cpuTime for the benchmarks of package orch_test.
var ProcessCPU = cpuTime

// cpuTime is the CPU time the process has used, user and system: the engine, its GC and the
// executor's goroutines, not the other processes of a busy machine.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
