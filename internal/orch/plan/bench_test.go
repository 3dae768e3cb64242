package plan_test

import (
	"context"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agora-dev/agora/internal/orch/plan"
)

// layered builds a plan of n tasks in layers of width: every task after the first layer
// depends on 2 or 3 tasks of the layer before, and holds 1 or 2 of locks lock names. It is
// deterministic, so tests can name its edges: task t(L*width+p) depends on positions p,
// (7p+1)%width and, for even p, (13p+5)%width of layer L-1.
func layered(n, width, locks int) string {
	var b strings.Builder
	b.Grow(n * 100)
	b.WriteString(head)
	for i := range n {
		layer, p := i/width, i%width
		b.WriteString("  - id: t" + strconv.Itoa(i) + "\n    subagent: fixer\n")
		if layer > 0 {
			prev := (layer - 1) * width
			deps := []int{prev + p, prev + (7*p+1)%width}
			if p%2 == 0 {
				deps = append(deps, prev+(13*p+5)%width)
			}
			b.WriteString("    depends_on: [")
			seen := map[int]bool{}
			first := true
			for _, d := range deps {
				if seen[d] {
					continue
				}
				seen[d] = true
				if !first {
					b.WriteString(", ")
				}
				first = false
				b.WriteString("t" + strconv.Itoa(d))
			}
			b.WriteString("]\n")
		}
		b.WriteString("    locks: [lock-" + strconv.Itoa(i%locks))
		if i%3 == 0 {
			b.WriteString(", {name: lock-" + strconv.Itoa((i+1)%locks) + ", mode: shared}")
		}
		b.WriteString("]\n")
	}
	return b.String()
}

// BenchmarkParse10k parses and validates a 10,000-task layered plan (width 100, 2-3
// dependencies and 1-2 of 200 locks per task).
func BenchmarkParse10k(b *testing.B) {
	src := []byte(layered(10_000, 100, 200))
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		if _, err := plan.Parse("p.yaml", src); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDigest10k computes the canonical form and digest of the same plan.
func BenchmarkDigest10k(b *testing.B) {
	p, err := plan.Parse("p.yaml", []byte(layered(10_000, 100, 200)))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		_ = p.Digest()
	}
}

// BenchmarkResolve10k applies the defaults to every task of the same plan.
func BenchmarkResolve10k(b *testing.B) {
	p, err := plan.Parse("p.yaml", []byte(layered(10_000, 100, 200)))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		_ = p.Resolve()
	}
}

// BenchmarkParse100k parses and validates a 100,000-task layered plan (width 100), given as
// its canonical JSON (what the engine re-reads, 12 MB) and as YAML, each by Parse ("new") and
// by Validate through strictyaml's YAML path alone ("base": every Parse before the JSON fast
// path, same code), and decoded alone without validation ("decode-base", "decode-new"). Besides time and allocations it reports live-MB, the largest live heap
// while the parse runs above the heap before it (which holds the document), and live/input,
// that over the document's size; see peakLive.
func BenchmarkParse100k(b *testing.B) {
	yml := []byte(layered(100_000, 100, 200))
	p, err := plan.Parse("p.yaml", yml)
	if err != nil {
		b.Fatal(err)
	}
	inputs := []struct {
		name string
		src  []byte
	}{{"json", p.Canonical()}, {"yaml", yml}}
	p = nil
	paths := []struct {
		name  string
		parse func(string, []byte) (any, error)
	}{
		{"base", func(file string, src []byte) (any, error) {
			return plan.ValidateYAML(context.Background(), file, src, nil)
		}},
		{"new", func(file string, src []byte) (any, error) { return plan.Parse(file, src) }},
		{"decode-base", func(file string, src []byte) (any, error) { return plan.DecodeDoc(file, src, true) }},
		{"decode-new", func(file string, src []byte) (any, error) { return plan.DecodeDoc(file, src, false) }},
	}
	for _, in := range inputs {
		for _, path := range paths {
			b.Run(in.name+"/"+path.name, func(b *testing.B) {
				b.SetBytes(int64(len(in.src)))
				b.ReportAllocs()
				live := peakLive(func() {
					if sink, err = path.parse("p."+in.name, in.src); err != nil {
						b.Fatal(err)
					}
				})
				sink = nil
				for b.Loop() {
					if _, err := path.parse("p."+in.name, in.src); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(live)/1e6, "live-MB")
				b.ReportMetric(float64(live)/float64(len(in.src)), "live/input")
			})
		}
	}
}

// sink keeps what a measured parse returns alive until peakLive has read the heap after it.
var sink any

// peakLive runs f and returns the largest live heap seen while it ran, less the live heap
// before: runtime/metrics' /gc/heap/live:bytes read after every GC cycle (by a finalizer that
// re-arms itself), with GOGC at 10 so a cycle ends at least every 10 % of heap growth. The
// figure includes what f returns, and is low by at most what f allocates between two cycles.
func peakLive(f func()) uint64 {
	runtime.GC()
	base := liveHeap()
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	var peak atomic.Uint64
	var done atomic.Bool
	var arm func()
	arm = func() {
		sentinel := new([64]byte)
		runtime.SetFinalizer(sentinel, func(*[64]byte) {
			if l := liveHeap(); l > peak.Load() {
				peak.Store(l)
			}
			if !done.Load() {
				arm()
			}
		})
	}
	arm()
	f()
	done.Store(true)
	runtime.GC()
	runtime.GC() // runs the last finalizer
	if peak.Load() < base {
		return 0
	}
	return peak.Load() - base
}

func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
