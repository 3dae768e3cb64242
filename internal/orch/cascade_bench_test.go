package orch_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/api"
)

// BenchmarkCascade100k runs BenchmarkScale's 100,000-task layered DAG one task at a time
// (concurrency 1, as bench/serverss submits it) and fails its first task: the engine skips
// every task that depends on it, 99,712 of them, 2,048 a batch (cascade.go), each skip's
// audit entry, event and row image held until its batch commits. It reports the largest live
// heap and the process's peak RSS, with serve's memory settings.
//
//	go test -run '^$' -bench Cascade100k -benchtime 1x ./internal/orch
func BenchmarkCascade100k(b *testing.B) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(orch.MemoryLimit))
	held := func(n int) { debug.SetMemoryLimit(orch.MemoryLimitFor(n)) }
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		runtime.GC()
		debug.FreeOSMemory()
		os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
		exec := newFakeExec(func(a orch.Attempt) orch.Outcome {
			if a.TaskID == "l0-0" {
				return orch.Outcome{State: lifecycle.TaskFailed, Reason: "exit", Detail: "exit 1"}
			}
			return orch.Outcome{State: lifecycle.TaskSucceeded}
		})
		p := mkPlan(b, "cascade", 1, layered(100, 1000, 200)...)
		// The run's end is read from the engine's commits: a watcher of 100,000 events
		// lags, and polling the run's status would be the benchmark's memory, not serve's.
		ended := &endObserver{ended: make(chan struct{})}
		h := startWith(b, filepath.Join(b.TempDir(), "orch.db"), exec, orch.Options{Held: held, Observer: ended})
		runtime.GC()
		heap := watchHeap()
		b.StartTimer()
		id := h.submit(p)
		<-ended.ended
		b.StopTimer()
		liveMax, _, gcs := heap()
		if r := h.wait(id); r.State != lifecycle.RunFailed {
			b.Fatalf("run %s", r.State)
		}
		b.ReportMetric(float64(liveMax)/1e6, "MB-live-heap-max")
		b.ReportMetric(float64(gcs), "gcs")
		b.ReportMetric(rssMB("VmHWM:"), "MB-peak-rss")
		h.stop()
	}
}

// endObserver closes ended when a committed batch ends a run.
type endObserver struct {
	commitCount
	once  sync.Once
	ended chan struct{}
}

func (o *endObserver) Committed(b orch.Batch) {
	for _, e := range b.Entries {
		if e.Kind == entry.RunEnded {
			o.once.Do(func() { close(o.ended) })
		}
	}
}

// BenchmarkRetry100k fails the first task of BenchmarkCascade100k's run, then retries it:
// the engine takes back the 99,712 skips, 2,048 a batch (unskip.go), while the retried task
// runs until the benchmark ends. It reports the largest live heap and the process's peak RSS
// from the retry until the last unskip committed, with serve's memory settings.
//
//	go test -run '^$' -bench Retry100k -benchtime 1x ./internal/orch
func BenchmarkRetry100k(b *testing.B) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(orch.MemoryLimit))
	held := func(n int) { debug.SetMemoryLimit(orch.MemoryLimitFor(n)) }
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		release := make(chan struct{})
		exec := newFakeExec(func(a orch.Attempt) orch.Outcome {
			if a.TaskID == "l0-0" {
				if a.Number == 1 {
					return orch.Outcome{State: lifecycle.TaskFailed, Reason: "exit", Detail: "exit 1"}
				}
				<-release
			}
			return orch.Outcome{State: lifecycle.TaskSucceeded}
		})
		p := mkPlan(b, "retry", 1, layered(100, 1000, 200)...)
		obs := &unskipCount{ended: make(chan struct{}), done: make(chan struct{})}
		h := startWith(b, filepath.Join(b.TempDir(), "orch.db"), exec, orch.Options{Held: held, Observer: obs})
		id := h.submit(p)
		<-obs.ended
		r := h.wait(id)
		if r.State != lifecycle.RunFailed {
			b.Fatalf("run %s", r.State)
		}
		obs.want.Store(int64(r.Counts[lifecycle.TaskSkipped]))
		runtime.GC()
		debug.FreeOSMemory()
		os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
		heap := watchHeap()
		b.StartTimer()
		if err := h.eng.Retry(context.Background(), api.ActionRequest{Run: id, Task: "l0-0", Actor: "bench"}); err != nil {
			b.Fatal(err)
		}
		<-obs.done
		b.StopTimer()
		liveMax, _, gcs := heap()
		b.ReportMetric(float64(liveMax)/1e6, "MB-live-heap-max")
		b.ReportMetric(float64(gcs), "gcs")
		b.ReportMetric(rssMB("VmHWM:"), "MB-peak-rss")
		close(release)
		h.stop()
	}
}

// unskipCount closes ended when a committed batch ends a run, and done once want
// orch.task.unskipped entries have committed.
type unskipCount struct {
	commitCount
	once, doneOnce sync.Once
	ended, done    chan struct{}
	want, got      atomic.Int64
}

func (o *unskipCount) Committed(b orch.Batch) {
	for _, e := range b.Entries {
		switch e.Kind {
		case entry.RunEnded:
			o.once.Do(func() { close(o.ended) })
		case entry.TaskUnskipped:
			if o.got.Add(1) == o.want.Load() {
				o.doneOnce.Do(func() { close(o.done) })
			}
		}
	}
}
