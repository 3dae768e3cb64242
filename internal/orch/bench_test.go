package orch_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch"
)

// noopExec completes every attempt at once, on its own goroutine, and records when each
// task fired and ended, for the dependency-to-fire latency.
type noopExec struct {
	mu      sync.Mutex
	started map[string]time.Time
	ended   map[string]time.Time
}

func newNoopExec() *noopExec {
	return &noopExec{started: map[string]time.Time{}, ended: map[string]time.Time{}}
}

func (n *noopExec) Start(ctx context.Context, a orch.Attempt, done func(orch.Outcome)) {
	now := time.Now()
	key := a.RunName + "/" + a.TaskID
	n.mu.Lock()
	n.started[key] = now
	n.mu.Unlock()
	go func() {
		n.mu.Lock()
		n.ended[key] = time.Now()
		n.mu.Unlock()
		done(orch.Outcome{DispatchID: a.DispatchID, State: lifecycle.TaskSucceeded})
	}()
}

func (n *noopExec) Cancel(context.Context, string) {}

// layered is a DAG of width*layers tasks; each task of a layer depends on 2 or 3 tasks of
// the layer before and holds one of lockNames locks (every fourth shared).
func layered(width, layers, lockNames int) []spec {
	var out []spec
	for l := range layers {
		for w := range width {
			s := spec{ID: fmt.Sprintf("l%d-%d", l, w)}
			if l > 0 {
				for k := range 2 + w%2 {
					s.Deps = append(s.Deps, fmt.Sprintf("l%d-%d", l-1, (w+k*7)%width))
				}
			}
			name := "lock-" + strconv.Itoa((l*width+w)%lockNames)
			if w%4 == 0 {
				s.Locks = []any{map[string]any{"name": name, "mode": "shared"}}
			} else {
				s.Locks = []any{name}
			}
			out = append(out, s)
		}
	}
	return out
}

// BenchmarkLayeredDAG runs a 10,000-task layered DAG (width 100, 200 lock names) with
// durable commits and reports tasks/s, the median dependency-to-fire latency, and the peak
// RSS of the process while it parses the plan (as serve does at submit) and runs it: the
// middle size of BenchmarkScale.
func BenchmarkLayeredDAG(b *testing.B) { benchLayered(b, 100, 100, 200) }

// rssMB reads a size field of /proc/self/status (VmRSS: now, VmHWM: the peak) in MB.
func rssMB(field string) float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, field) {
			f := strings.Fields(line)
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return -1
}

// BenchmarkTransition measures one task's full cycle (ready, fired, succeeded: three
// transitions, each with its audit entry) with 1,000 and 100,000 finished tasks already in
// the database: the cost must not grow with history.
func BenchmarkTransition(b *testing.B) {
	for _, finished := range []int{1000, 100000} {
		b.Run(fmt.Sprintf("finished=%d", finished), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "orch.db")
			seedHistory(b, path, finished)
			h := start(b, path, newNoopExec())
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				h.runToEnd(mkPlan(b, fmt.Sprintf("one-%d", i), 1, spec{ID: "t"}))
			}
		})
	}
}

// seedHistory writes n finished tasks (in sealed runs of 1,000) and their audit entries.
func seedHistory(b *testing.B, path string, n int) {
	db := openDB(b, path)
	defer db.Close()
	ctx := context.Background()
	log := audit.New(nil)
	const per = 1000
	for r := 0; r*per < n; r++ {
		var specs []spec
		for i := range per {
			specs = append(specs, spec{ID: fmt.Sprintf("t%d", i)})
		}
		p := mkPlan(b, fmt.Sprintf("hist-%d", r), 1, specs...)
		runID := fmt.Sprintf("HIST%08d", r)
		err := db.Tx(ctx, func(tx *sql.Tx) error {
			now := time.Now().UTC().Format(time.RFC3339Nano)
			if _, err := tx.Exec(`INSERT INTO runs(id, name, digest, state, actor, created_at, ended_at, sealed_at) VALUES (?, ?, ?, 'succeeded', 'seed', ?, ?, ?)`,
				runID, p.Name, p.Digest(), now, now, now); err != nil {
				return err
			}
			if _, err := tx.Exec(`INSERT INTO run_plans(run_id, plan) VALUES (?, ?)`, runID, p.Canonical()); err != nil {
				return err
			}
			var entries []audit.Entry
			for i := range per {
				d := fmt.Sprintf("%s-%05d", runID, i)
				if _, err := tx.Exec(`INSERT INTO tasks(run_id, idx, id, state, attempts, dispatch_id) VALUES (?, ?, ?, 'succeeded', 1, ?)`, runID, i, fmt.Sprintf("t%d", i), d); err != nil {
					return err
				}
				if _, err := tx.Exec(`INSERT INTO attempts(dispatch_id, run_id, task_idx, number, state, fired_at, ended_at) VALUES (?, ?, ?, 1, 'succeeded', ?, ?)`, d, runID, i, now, now); err != nil {
					return err
				}
				for _, k := range []string{"orch.task.ready", "orch.task.fired", "orch.task.succeeded"} {
					entries = append(entries, audit.Entry{Actor: "orch", Kind: k, Subject: "run/" + runID + "/task/" + strconv.Itoa(i)})
				}
			}
			_, err := log.AppendAll(ctx, tx, entries)
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
