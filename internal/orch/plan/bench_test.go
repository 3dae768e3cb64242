package plan_test

import (
	"strconv"
	"strings"
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
