package verify

import (
	"crypto/sha256"
	"fmt"
	"reflect"
	"runtime"
	"testing"
)

// TestRedTeam28S3_WideTreeRowsAreTheWalksRows attacks fae9729's whole-log tree hashed on
// every CPU (levels from parallelTreeFrom parents split in runs, one per CPU): a bundle of
// the whole log wide enough to be split (2*parallelTreeFrom+5 leaves, so its first level
// ends in a lone node), with forged proofs on the leaves beside each run's boundary for 2
// and 3 CPUs, at the ends and in the middle, gets with the tree built on 1, 2 and 3 CPUs
// exactly the rows that walking each proof gives: the right proof passes, a neighbour's, a
// garbage one, one hash more or less, two hashes swapped fail.
func TestRedTeam28S3_WideTreeRowsAreTheWalksRows(t *testing.T) {
	n := 2*parallelTreeFrom + 5
	leaves := make([][]byte, n)
	for i := range leaves {
		h := sha256.Sum256([]byte{0, byte(i), byte(i >> 8), byte(i >> 16), 0x5a})
		leaves[i] = h[:]
	}
	root := mth(leaves)
	parents := (n + 1) / 2
	picked := map[int]bool{0: true, 1: true, n / 2: true, n - 2: true, n - 1: true}
	for _, workers := range []int{2, 3} {
		chunk := (parents + workers - 1) / workers
		for from := chunk; from < parents; from += chunk {
			for _, m := range []int{2*from - 2, 2*from - 1, 2 * from, 2*from + 1} {
				picked[m] = true
			}
		}
	}
	proofs := map[int][][]byte{}
	for m := range picked {
		proofs[m] = path(m, leaves)
	}
	garbage := func(i int) []byte { h := sha256.Sum256([]byte{byte(i), byte(i >> 8), 0xee}); return h[:] }
	forge := map[string]func(m int) [][]byte{
		"right":         func(m int) [][]byte { return clone2(proofs[m]) },
		"neighbour's":   func(m int) [][]byte { return path((m+1)%n, leaves) },
		"garbage":       func(m int) [][]byte { p := clone2(proofs[m]); p[len(p)/2] = garbage(m); return p },
		"one hash more": func(m int) [][]byte { return append(clone2(proofs[m]), root) },
		"one hash less": func(m int) [][]byte { return clone2(proofs[m][:len(proofs[m])-1]) },
		"two swapped":   func(m int) [][]byte { p := clone2(proofs[m]); p[0], p[1] = p[1], p[0]; return p },
	}
	for name, f := range forge {
		rows := map[int]string{}
		for _, procs := range []int{1, 2, 3} {
			prev := runtime.GOMAXPROCS(procs)
			fast := treeVerifier(leaves, root)
			fast.tree = newFullTree(fast)
			runtime.GOMAXPROCS(prev)
			if fast.tree == nil {
				t.Fatalf("GOMAXPROCS %d: no tree for the whole log", procs)
			}
			for m := range picked {
				p := f(m)
				fast.rep = &Report{}
				e := fast.b.Entries[m]
				e.InclusionProof = p
				fast.checkInclusion(e, fmt.Sprint(m))
				walk := treeVerifier(leaves, root)
				walk.rep = &Report{}
				we := walk.b.Entries[m]
				we.InclusionProof = clone2(p)
				walk.checkInclusion(we, fmt.Sprint(m))
				if !reflect.DeepEqual(fast.rep.Checks, walk.rep.Checks) {
					t.Errorf("%s proof of leaf %d, tree on %d CPUs: %v; walking it: %v", name, m, procs, fast.rep.Checks, walk.rep.Checks)
				}
				if len(fast.rep.Checks) != 1 || fast.rep.Checks[0].OK != (name == "right") {
					t.Errorf("%s proof of leaf %d, tree on %d CPUs: %v", name, m, procs, fast.rep.Checks)
				}
				got := fmt.Sprint(fast.rep.Checks)
				if was, ok := rows[m]; ok && was != got {
					t.Errorf("%s proof of leaf %d: rows differ between CPU counts: %s / %s", name, m, was, got)
				}
				rows[m] = got
			}
		}
	}
}
