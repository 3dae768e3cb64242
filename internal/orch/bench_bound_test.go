package orch_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/store"
)

// BenchmarkDepToFireBound asks what bounds BenchmarkLayeredDAG's dependency-to-fire p50
// (<= 2 ms at >= 20,000 tasks/s). Each variant runs a DAG with the no-op
// executor and reports tasks/s, the p50 and mean dependency-to-fire latency, and two
// products that Little's law ties together: "waiting-mean" (the time-average number of tasks
// whose dependencies have all ended but which have not fired: the sum of their waits over the
// run's length) and "p50-x-tasks/s" (the p50 times the throughput, in tasks). If the waiting
// tasks are fixed by the DAG's shape rather than by the engine, the p50 can only fall as
// throughput rises, whatever the batching or the fsync.
//
//   - layered/full: BenchmarkLayeredDAG's DAG and engine as serve runs it (synchronous=FULL).
//   - layered/full/drain=N: batches of at most N events instead of 4,096.
//   - layered/normal: synchronous=NORMAL, no fsync at any commit: the bound for any group
//     commit or pipelined fsync (serve never runs like this; a commit must be durable before
//     its fires).
//   - chain/full: a 1,000-task chain: one task waits at a time, so its dependency-to-fire is
//     the engine's own reaction (a commit of one completion and one fire, fsync included)
//     with nothing queued ahead of it; chain/normal the same without the fsync.
func BenchmarkDepToFireBound(b *testing.B) {
	layered := layered(100, 100, 200)
	var chain []spec
	for i := range 1000 {
		s := spec{ID: fmt.Sprintf("c%d", i)}
		if i > 0 {
			s.Deps = []string{fmt.Sprintf("c%d", i-1)}
		}
		chain = append(chain, s)
	}
	for _, v := range []struct {
		name  string
		specs []spec
		full  bool
		drain int
	}{
		{"layered/full", layered, true, 0},
		{"layered/full/drain=32", layered, true, 32},
		{"layered/full/drain=64", layered, true, 64},
		{"layered/normal", layered, false, 0},
		{"chain/full", chain, true, 0},
		{"chain/normal", chain, false, 0},
	} {
		b.Run(v.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				runBound(b, v.specs, v.full, v.drain)
			}
		})
	}
}

func runBound(b *testing.B, specs []spec, full bool, drain int) {
	b.StopTimer()
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(orch.MemoryLimit))
	runtime.GC()
	dir, err := os.MkdirTemp("", "orchbench")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	var opts []store.Option
	if full {
		opts = append(opts, store.FullSync())
	}
	path := filepath.Join(dir, "orch.db")
	db, err := store.Open(context.Background(), path, orch.Migrations(), opts...)
	if err != nil {
		b.Fatal(err)
	}
	exec := newNoopExec()
	eng, err := orch.Open(context.Background(), db, audit.New(nil), exec, orch.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if drain > 0 {
		orch.SetDrain(eng, drain)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &harness{tb: b, path: path, db: db, eng: eng, cancel: cancel, done: make(chan error, 1)}
	go func() { h.done <- eng.Run(ctx) }()
	defer h.stop()
	p := mkPlan(b, "bound", 1000, specs...)
	b.StartTimer()
	t0 := time.Now()
	id := h.runToEnd(p)
	elapsed := time.Since(t0)
	b.StopTimer()
	if r := h.wait(id); r.State != lifecycle.RunSucceeded {
		b.Fatalf("run %s", r.State)
	}
	var lat []time.Duration
	var sum time.Duration
	for _, s := range specs {
		if len(s.Deps) == 0 {
			continue
		}
		var last time.Time
		for _, d := range s.Deps {
			if e := exec.ended["bound/"+d]; e.After(last) {
				last = e
			}
		}
		w := exec.started["bound/"+s.ID].Sub(last)
		lat = append(lat, w)
		sum += w
	}
	slices.Sort(lat)
	tps := float64(len(specs)) / elapsed.Seconds()
	p50 := lat[len(lat)/2]
	b.ReportMetric(tps, "tasks/s")
	b.ReportMetric(float64(p50.Microseconds())/1000, "ms-dep-to-fire-p50")
	b.ReportMetric(float64(sum.Microseconds())/1000/float64(len(lat)), "ms-dep-to-fire-mean")
	b.ReportMetric(sum.Seconds()/elapsed.Seconds(), "waiting-mean")
	b.ReportMetric(p50.Seconds()*tps, "p50-x-tasks/s")
}

// BenchmarkFdatasync is the disk's floor under a durable commit: write 120 KB (about what a
// layer's commit appends to the WAL) to a file in the temporary directory the other
// benchmarks use, then fdatasync it. It reports the median and p90 of the syncs alone.
func BenchmarkFdatasync(b *testing.B) {
	f, err := os.CreateTemp("", "orchbench-fsync")
	if err != nil {
		b.Fatal(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 120<<10)
	lat := make([]time.Duration, 0, b.N)
	for i := 0; i < b.N; i++ {
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
		t := time.Now()
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "ms-p50")
	b.ReportMetric(float64(lat[len(lat)*9/10].Microseconds())/1000, "ms-p90")
}
