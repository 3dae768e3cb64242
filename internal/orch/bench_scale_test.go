package orch_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch"
)

// commitCount is an Observer that counts committed batches.
type commitCount struct{ n atomic.Int64 }

func (c *commitCount) Committed(orch.Batch)                         { c.n.Add(1) }
func (c *commitCount) LockWait(runID, runName, taskID, lock string) {}
func (c *commitCount) Reattached(orch.Attempt)                      {}

// BenchmarkScale runs the layered DAG of BenchmarkLayeredDAG (width 100, 200 lock names) at
// 1,000, 10,000 and 100,000 tasks (the most a plan may have), with the soft memory limit agora
// orch serve sets (orch.MemoryLimitFor the tasks held), and reports tasks/s, the
// dependency-to-fire p50 and p99, the time from the submission to the first task's fire (the
// submission's own cost: validation, resolution, the run's rows), the commits made, the largest
// live heap a collection found, the collections made, the collector's share of the CPU used,
// the process's CPU time (user and system) a task and the submission's share of it (up to the
// first fire), and the process's peak RSS (the plan's parse included, as serve parses it at
// submit). The -folded figures count up to the row log's last fold instead of the run's end:
// the run's rows in the tables (a run of fewer commits than the fold's bound folds them all
// after its end). The CPU a task is the figure a busy machine distorts least: wall-clock rates
// move with what else runs, the CPU the process used much less. The engine's cost per task
// must not grow with the run: the 100,000-task rate against the 10,000-task one, and the p99s,
// are the figures to compare. ORCH_BENCH_FIXEDLIMIT=1 holds the limit at orch.MemoryLimit
// instead, as a baseline; ORCH_BENCH_CPUPROFILE writes a CPU profile of each run.
//
//	go test -run '^$' -bench Scale -benchtime 1x -count 3 ./internal/orch
func BenchmarkScale(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run("tasks="+strconv.Itoa(n), func(b *testing.B) { benchLayered(b, 100, n/100, 200) })
	}
}

// timedExec is a no-op executor that keeps only what the figures need: when each task started
// and ended, in nanoseconds since t0, at the task's place in the plan. The harness holds a few
// bytes a task while the run goes, not the specs and maps of strings it was built from (60 MB
// at 100,000 tasks, which every collection marked beside the engine's own): what the collector
// does is then the engine's, as in serve.
type timedExec struct {
	t0             time.Time
	index          func(taskID string) int
	started, ended []atomic.Int64
	n              atomic.Int64  // how many have started
	firstCPU       time.Duration // the process's CPU time when the first task started
}

func newTimedExec(tasks int, index func(string) int) *timedExec {
	return &timedExec{index: index, started: make([]atomic.Int64, tasks), ended: make([]atomic.Int64, tasks)}
}

func (x *timedExec) Start(ctx context.Context, a orch.Attempt, done func(orch.Outcome)) {
	i := x.index(a.TaskID)
	x.started[i].Store(int64(time.Since(x.t0)))
	if x.n.Add(1) == 1 {
		x.firstCPU = orch.ProcessCPU() // Start runs on the engine's goroutine, which waits for it
	}
	go func() {
		x.ended[i].Store(int64(time.Since(x.t0)))
		done(orch.Outcome{DispatchID: a.DispatchID, State: lifecycle.TaskSucceeded})
	}()
}

func (x *timedExec) Cancel(context.Context, string) {}

// layeredIndex is the place in layered(width, ...)'s order of the task called id ("l<layer>-<w>").
func layeredIndex(width int) func(string) int {
	return func(id string) int {
		l, w, ok := strings.Cut(strings.TrimPrefix(id, "l"), "-")
		li, err1 := strconv.Atoi(l)
		wi, err2 := strconv.Atoi(w)
		if !ok || err1 != nil || err2 != nil {
			panic("not a layered task id: " + id)
		}
		return li*width + wi
	}
}

// benchLayered runs layered(width, layers, lockNames) b.N times, each in a fresh orch.db, and
// reports its figures.
func benchLayered(b *testing.B, width, layers, lockNames int) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(orch.MemoryLimit))
	held := func(n int) { debug.SetMemoryLimit(orch.MemoryLimitFor(n)) }
	if os.Getenv("ORCH_BENCH_FIXEDLIMIT") != "" {
		held = nil
	}
	index := layeredIndex(width)
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		// Start each run's peak RSS from what the process holds now: the previous run's
		// garbage returned, the kernel's high-water mark reset (clear_refs 5).
		runtime.GC()
		debug.FreeOSMemory()
		os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
		dir, err := os.MkdirTemp("", "orchbench")
		if err != nil {
			b.Fatal(err)
		}
		commits := &commitCount{}
		name := fmt.Sprintf("scale-%d", i)
		// The plan, and each task's dependencies as places in it (flattened: task k's are
		// deps[from[k]:from[k+1]]); the specs are garbage once the plan is parsed.
		specs := layered(width, layers, lockNames)
		tasks := len(specs)
		from, deps := make([]int32, tasks+1), make([]int32, 0, 3*tasks)
		for k, s := range specs {
			for _, d := range s.Deps {
				deps = append(deps, int32(index(d)))
			}
			from[k+1] = int32(len(deps))
		}
		p := mkPlan(b, name, 1000, specs...)
		specs = nil
		exec := newTimedExec(tasks, index)
		h := startWith(b, filepath.Join(dir, "orch.db"), exec, orch.Options{Observer: commits, Held: held})
		stopProfile := heapProfileMidway(b, exec, tasks)
		runtime.GC() // the plan's parse is the harness's: the heap watched starts without it
		heap := watchHeap()
		stopCPU := cpuProfileRun(b, tasks)
		b.StartTimer()
		cpu0 := orch.ProcessCPU()
		exec.t0 = time.Now()
		id := h.runToEnd(p)
		stopProfile()
		elapsed := time.Since(exec.t0)
		cpu := orch.ProcessCPU() - cpu0
		liveMax, gcShare, gcs := heap()
		// The run's end is published before the row log's last records are folded into
		// the tables (fold.go): a run of fewer commits than foldBound leaves all of its fold
		// to after its end. Until the log is empty is the engine's whole work for the run.
		h.waitFolded()
		folded, cpuFolded := time.Since(exec.t0), orch.ProcessCPU()-cpu0
		stopCPU()
		r := h.wait(id)
		b.StopTimer()
		if r.State != lifecycle.RunSucceeded {
			b.Fatalf("run %s", r.State)
		}
		var lat []time.Duration
		first := elapsed
		for k := range tasks {
			started := time.Duration(exec.started[k].Load())
			if from[k] == from[k+1] {
				first = min(first, started)
				continue
			}
			var last time.Duration
			for _, d := range deps[from[k]:from[k+1]] {
				last = max(last, time.Duration(exec.ended[d].Load()))
			}
			lat = append(lat, started-last)
		}
		slices.Sort(lat)
		b.ReportMetric(float64(tasks)/elapsed.Seconds(), "tasks/s")
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "ms-dep-to-fire-p50")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "ms-dep-to-fire-p99")
		b.ReportMetric(float64(first.Microseconds())/1000, "ms-to-first-fire")
		b.ReportMetric(float64(commits.n.Load()), "commits")
		b.ReportMetric(float64(liveMax)/1e6, "MB-live-heap-max")
		b.ReportMetric(float64(gcs), "gcs")
		b.ReportMetric(100*gcShare, "%-cpu-in-gc")
		b.ReportMetric(float64(cpu.Microseconds())/float64(tasks), "cpu-us/task")
		b.ReportMetric(float64((exec.firstCPU-cpu0).Microseconds())/float64(tasks), "cpu-us/task-submit")
		b.ReportMetric(float64(tasks)/folded.Seconds(), "tasks/s-folded")
		b.ReportMetric(float64(cpuFolded.Microseconds())/float64(tasks), "cpu-us/task-folded")
		b.ReportMetric(rssMB("VmHWM:"), "MB-peak-rss")
		h.stop()
		os.RemoveAll(dir)
	}
}

// profileAt is how many of tasks have started when heapProfileMidway writes its profile.
func profileAt(tasks int) int {
	if n, err := strconv.Atoi(os.Getenv("ORCH_BENCH_HEAPPROFILE_AT")); err == nil && n > 0 {
		return n
	}
	return tasks / 2
}

// watchHeap samples the live heap (as of the last collection) every 10 ms until the returned
// func is called, which reports the largest sample, the collector's share of the CPU the
// process used meanwhile and the collections it completed. Nothing here forces a collection,
// so the run's timing is its own.
func watchHeap() func() (liveMax uint64, gcShare float64, gcs uint64) {
	samples := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/cpu/classes/gc/total:cpu-seconds"},
		{Name: "/cpu/classes/total:cpu-seconds"}, {Name: "/cpu/classes/idle:cpu-seconds"}, {Name: "/gc/cycles/total:gc-cycles"}}
	cpu := func() (gc, used float64, cycles uint64) {
		metrics.Read(samples)
		return samples[1].Value.Float64(), samples[2].Value.Float64() - samples[3].Value.Float64(), samples[4].Value.Uint64()
	}
	gc0, used0, cycles0 := cpu()
	var max atomic.Uint64
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > max.Load() {
				max.Store(v)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() (uint64, float64, uint64) {
		close(done)
		<-stopped
		gc1, used1, cycles1 := cpu()
		return max.Load(), (gc1 - gc0) / (used1 - used0), cycles1 - cycles0
	}
}

// heapProfileMidway writes a heap profile to $ORCH_BENCH_HEAPPROFILE once half the run's
// tasks have started (what the engine holds in the middle of a run, not after it), or
// $ORCH_BENCH_HEAPPROFILE_AT of them (1: right after the submission's commit); without the
// variable it does nothing. The returned func stops the watcher.
func heapProfileMidway(b *testing.B, exec *timedExec, tasks int) func() {
	path := os.Getenv("ORCH_BENCH_HEAPPROFILE")
	if path == "" {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			if int(exec.n.Load()) < profileAt(tasks) {
				continue
			}
			f, err := os.Create(path)
			if err != nil {
				b.Error(err)
				return
			}
			runtime.GC()
			if err := pprof.WriteHeapProfile(f); err != nil {
				b.Error(err)
			}
			f.Close()
			return
		}
	}()
	return func() { close(done) }
}

// cpuProfileRun writes a CPU profile of one run, from its submission to its last fold, to
// $ORCH_BENCH_CPUPROFILE.<tasks> (the plan's build and parse, which -test.cpuprofile would
// count, left out); without the variable it does nothing. The returned func stops it.
func cpuProfileRun(b *testing.B, tasks int) func() {
	path := os.Getenv("ORCH_BENCH_CPUPROFILE")
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path + "." + strconv.Itoa(tasks))
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}
