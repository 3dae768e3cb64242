package audit_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/audit"
)

// BenchmarkProofAtSize reads what a checkpoint and a single inclusion proof read, the root
// at the log's size (RootAt) and one entry's proof (InclusionProof), from logs of growing
// size, dense (as a home's agora.db stores its tree) and sparse (as orch.db does): flat across
// sizes is O(log n). The sizes are AUDIT_BENCH_SIZES (default 1000,1000000); a 10,000,000-entry
// log takes minutes and about 3 GB of disk to fill:
//
//	AUDIT_BENCH_SIZES=1000,1000000,10000000 go test -run '^$' -bench ProofAtSize -benchtime 2000x ./internal/audit
func BenchmarkProofAtSize(b *testing.B) {
	sizes := []int{1_000, 1_000_000}
	if env := os.Getenv("AUDIT_BENCH_SIZES"); env != "" {
		sizes = nil
		for _, f := range strings.Split(env, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n <= 0 {
				b.Fatalf("AUDIT_BENCH_SIZES: %q is not a positive count", f)
			}
			sizes = append(sizes, n)
		}
	}
	for _, tree := range []string{"dense", "sparse"} {
		for _, n := range sizes {
			b.Run(tree+"/n="+strconv.Itoa(n), func(b *testing.B) {
				db, _ := openDB(b)
				l := audit.New(nil)
				if tree == "sparse" {
					l = l.SparseTree()
				}
				fillWith(b, db, n, l)
				ctx := context.Background()
				size := uint64(n)
				b.Run("root", func(b *testing.B) {
					for b.Loop() {
						if _, err := audit.RootAt(ctx, db.SQL(), size); err != nil {
							b.Fatal(err)
						}
					}
				})
				b.Run("inclusion", func(b *testing.B) {
					i := uint64(0)
					for b.Loop() {
						if _, err := audit.InclusionProof(ctx, db.SQL(), i%size, size); err != nil {
							b.Fatal(err)
						}
						i += 7919
					}
				})
			})
		}
	}
}
