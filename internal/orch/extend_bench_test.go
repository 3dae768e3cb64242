package orch_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch"
)

// batchTimer is an Observer that hands over the batch whose entries hold kind, with how
// long it took from its first event to the end of its commit.
type batchTimer struct {
	kind string
	got  chan time.Duration
}

func (o *batchTimer) Committed(x orch.Batch) {
	for _, e := range x.Entries {
		if e.Kind == o.kind {
			o.got <- time.Since(x.Began)
			return
		}
	}
}
func (o *batchTimer) LockWait(string, string, string, string) {}
func (o *batchTimer) Reattached(orch.Attempt)                 {}

// gateExec holds every attempt until released; the producer's ends with the list once
// split is closed.
type gateExec struct {
	split   chan struct{}
	release chan struct{}
	items   orch.ItemList
	once    sync.Once
}

func (g *gateExec) Start(ctx context.Context, a orch.Attempt, done func(orch.Outcome)) {
	go func() {
		if a.TaskID == "split" {
			<-g.split
			done(orch.Outcome{DispatchID: a.DispatchID, State: lifecycle.TaskSucceeded, Items: map[string]orch.ItemList{"items.json": g.items}})
			return
		}
		<-g.release
	}()
}
func (g *gateExec) Cancel(context.Context, string) {}

// BenchmarkExtend10k measures the extension of a 10,000-item fan-out: the batch that ends
// the producer, adds the 10,000 tasks (their specs, rows, ready entries and the
// orch.run.extended entry) and fires the first, applied and committed in one durable
// transaction with its audit entries, from the producer's end to the commit. The baseline,
// measured the same way in the same run, is the batch that submits a plan of 10,000 tasks.
// decode is DecodeItems of the 10,000-item list (done by the executor, outside the batch).
func BenchmarkExtend10k(b *testing.B) {
	const n = 10_000
	var list strings.Builder
	list.WriteByte('[')
	for i := range n {
		if i > 0 {
			list.WriteByte(',')
		}
		fmt.Fprintf(&list, `{"id":"pkg-%05d","path":"internal/pkg%05d"}`, i, i)
	}
	list.WriteByte(']')
	raw := []byte(list.String())
	items, err := orch.DecodeItems(raw)
	if err != nil {
		b.Fatal(err)
	}
	fanOut := `version: 1
name: fan
concurrency: 64
tasks:
  - {id: split, subagent: splitter}
  - id: each
    fan_out: {from: split, select: "output:items.json", template: {subagent: worker, input: {goal: port}, locks: [{name: ci, mode: shared}]}}
  - {id: reduce, subagent: reducer, needs: {parts: {from: each, select: outputs}}}
`
	var flat []spec
	for i := range n {
		flat = append(flat, spec{ID: fmt.Sprintf("t%05d", i), Input: map[string]any{"goal": "port", "item": map[string]any{"id": i}},
			Locks: []any{map[string]any{"name": "ci", "mode": "shared"}}})
	}
	run := func(b *testing.B, kind string, setup func(h *harness, g *gateExec) func()) {
		b.ReportAllocs()
		var total time.Duration
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			dir, err := os.MkdirTemp("", "extendbench")
			if err != nil {
				b.Fatal(err)
			}
			g := &gateExec{split: make(chan struct{}), release: make(chan struct{}), items: orch.ItemList{Items: items}}
			obs := &batchTimer{kind: kind, got: make(chan time.Duration, 1)}
			h := startWith(b, filepath.Join(dir, "orch.db"), g, orch.Options{Observer: obs})
			trigger := setup(h, g)
			b.StartTimer()
			trigger()
			d := <-obs.got
			b.StopTimer()
			total += d
			close(g.release)
			h.stop()
			os.RemoveAll(dir)
		}
		b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/batch")
	}
	b.Run("submit", func(b *testing.B) {
		run(b, "orch.run.submitted", func(h *harness, g *gateExec) func() {
			p := mkPlan(b, "flat", 64, flat...)
			return func() { h.submit(p) }
		})
	})
	b.Run("extend", func(b *testing.B) {
		run(b, "orch.run.extended", func(h *harness, g *gateExec) func() {
			h.submit(parsePlan(b, fanOut))
			return func() { close(g.split) }
		})
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := orch.DecodeItems(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
}
