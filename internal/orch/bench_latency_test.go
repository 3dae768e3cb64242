package orch_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch"
)

// batchLog is an Observer that notes, for every committed batch, when its transaction began
// and ended and which tasks it fired.
type batchLog struct {
	mu      sync.Mutex
	batches []loggedBatch
	firedIn map[string]int // task id -> index of the batch that fired it
}

type loggedBatch struct {
	commitStart, commitEnd time.Time
	entries                int
}

func (l *batchLog) Committed(b orch.Batch) {
	end := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	i := len(l.batches)
	l.batches = append(l.batches, loggedBatch{commitStart: end.Add(-b.Commit), commitEnd: end, entries: len(b.Entries)})
	for _, e := range b.Entries {
		if e.Kind == entry.TaskFired {
			l.firedIn[e.Subject[strings.LastIndex(e.Subject, "/")+1:]] = i
		}
	}
}
func (l *batchLog) LockWait(runID, runName, taskID, lock string) {}
func (l *batchLog) Reattached(a orch.Attempt)                    {}

// BenchmarkLayeredDAGLatency is BenchmarkLayeredDAG's run with an Observer that splits each
// dependency-to-fire latency into its parts: from the last dependency's end to the start of
// the transaction that fires the dependent ("queue": waiting behind the commit in progress,
// then the batch's own scheduling), that transaction ("commit"), and from its end to the
// executor's Start ("start": starting the attempts fired before it). It reports the median of
// each part, the median transaction's length and size, and the process's CPU time per task
// (comparable with BenchmarkLayerFloor's).
func BenchmarkLayeredDAGLatency(b *testing.B) {
	specs := layered(100, 100, 200)
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(orch.MemoryLimit))
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		runtime.GC()
		dir, err := os.MkdirTemp("", "orchbench")
		if err != nil {
			b.Fatal(err)
		}
		exec := newNoopExec()
		log := &batchLog{firedIn: map[string]int{}}
		db := openDB(b, filepath.Join(dir, "orch.db"))
		eng, err := orch.Open(context.Background(), db, audit.New(nil), exec, orch.Options{Observer: log})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		h := &harness{tb: b, path: filepath.Join(dir, "orch.db"), db: db, eng: eng, cancel: cancel, done: make(chan error, 1)}
		go func() { h.done <- eng.Run(ctx) }()
		p := mkPlan(b, "layered", 1000, specs...)
		b.StartTimer()
		t0, cpu0 := time.Now(), orch.ProcessCPU()
		id := h.runToEnd(p)
		elapsed, cpu := time.Since(t0), orch.ProcessCPU()-cpu0
		b.StopTimer()
		if r := h.wait(id); r.State != lifecycle.RunSucceeded {
			b.Fatalf("run %s", r.State)
		}
		h.stop()
		var total, queue, commit, start, txLen []time.Duration
		var txSize []int
		for _, s := range specs {
			if len(s.Deps) == 0 {
				continue
			}
			var last time.Time
			for _, d := range s.Deps {
				if e := exec.ended["layered/"+d]; e.After(last) {
					last = e
				}
			}
			bt := log.batches[log.firedIn[s.ID]]
			started := exec.started["layered/"+s.ID]
			total = append(total, started.Sub(last))
			queue = append(queue, bt.commitStart.Sub(last))
			commit = append(commit, bt.commitEnd.Sub(bt.commitStart))
			start = append(start, started.Sub(bt.commitEnd))
		}
		for _, bt := range log.batches {
			txLen = append(txLen, bt.commitEnd.Sub(bt.commitStart))
			txSize = append(txSize, bt.entries)
		}
		ms := func(d []time.Duration) float64 {
			slices.Sort(d)
			return float64(d[len(d)/2].Microseconds()) / 1000
		}
		slices.Sort(txSize)
		b.ReportMetric(float64(len(specs))/elapsed.Seconds(), "tasks/s")
		b.ReportMetric(ms(total), "ms-dep-to-fire-p50")
		b.ReportMetric(ms(queue), "ms-queue-p50")
		b.ReportMetric(ms(commit), "ms-commit-p50")
		b.ReportMetric(ms(start), "ms-start-p50")
		b.ReportMetric(ms(txLen), "ms-tx-p50")
		b.ReportMetric(float64(txSize[len(txSize)/2]), "entries-tx-p50")
		b.ReportMetric(float64(len(log.batches)), "tx")
		b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(len(specs)), "cpu-us/task")
		os.RemoveAll(dir)
	}
}
