package verify

import (
	"bytes"
	"crypto/sha256"
	"runtime"
	"testing"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

// TestFullTree_MatchesInclusionProofs: for every tree up to 70 leaves, the recomputed tree's
// root is RFC 6962's (the naive mth) and the library's, and a proof is taken by provesLeaf
// exactly when proof.VerifyInclusion accepts it: the right path, not a flipped, shortened,
// lengthened one, nor another leaf's.
func TestFullTree_MatchesInclusionProofs(t *testing.T) {
	var leaves [][]byte
	for n := 1; n <= 70; n++ {
		h := sha256.Sum256([]byte{0, byte(n), byte(n >> 8)})
		leaves = append(leaves, h[:])
		root := mth(leaves)
		v := treeVerifier(leaves, root)
		tree := newFullTree(v)
		if tree == nil {
			t.Fatalf("n=%d: no tree for the bundle of every leaf with the right root", n)
		}
		for m := 0; m < n; m++ {
			good := path(m, leaves)
			proofs := [][][]byte{good, append(append([][]byte{}, good...), root)}
			if len(good) > 0 {
				flipped := append([][]byte{}, good...)
				flipped[len(good)-1] = bytes.Clone(flipped[len(good)-1])
				flipped[len(good)-1][7] ^= 1
				proofs = append(proofs, flipped, good[:len(good)-1], good[1:])
			}
			if n > 1 {
				proofs = append(proofs, path((m+1)%n, leaves))
			}
			for i, p := range proofs {
				lib := proof.VerifyInclusion(rfc6962.DefaultHasher, uint64(m), uint64(n), leaves[m], p, root) == nil
				if got := tree.provesLeaf(uint64(m), p); got != lib || got != (i == 0) {
					t.Errorf("n=%d m=%d proof %d: provesLeaf %v, library %v", n, m, i, got, lib)
				}
			}
		}
	}
}

// TestFullTree_WideLevelsOnEveryCPU: levels wide enough to be hashed on every CPU (the
// first, of 2*parallelTreeFrom+2 parents, ends in a lone node) give RFC 6962's root, and
// each proof checked is taken exactly when the library takes it; with one CPU too.
func TestFullTree_WideLevelsOnEveryCPU(t *testing.T) {
	n := 4*parallelTreeFrom + 3
	leaves := make([][]byte, n)
	for i := range leaves {
		h := sha256.Sum256([]byte{0, byte(i), byte(i >> 8), byte(i >> 16)})
		leaves[i] = h[:]
	}
	root := mth(leaves)
	for _, procs := range []int{1, 2, 3} {
		prev := runtime.GOMAXPROCS(procs)
		tree := newFullTree(treeVerifier(leaves, root))
		runtime.GOMAXPROCS(prev)
		if tree == nil {
			t.Fatalf("GOMAXPROCS %d: no tree for the bundle of every leaf with the right root", procs)
		}
		for _, m := range []int{0, 1, n / 2, n - 2, n - 1} {
			good := path(m, leaves)
			other := path((m+1)%n, leaves)
			for i, p := range [][][]byte{good, other} {
				lib := proof.VerifyInclusion(rfc6962.DefaultHasher, uint64(m), uint64(n), leaves[m], p, root) == nil
				if got := tree.provesLeaf(uint64(m), p); got != lib || got != (i == 0) {
					t.Errorf("GOMAXPROCS %d, leaf %d, proof %d: provesLeaf %v, library %v", procs, m, i, got, lib)
				}
			}
		}
	}
}

// TestFullTree_OnlyForTheWholeTree: no tree (so every proof is walked) when the entries are
// not exactly the checkpoint's leaves or do not give its root.
func TestFullTree_OnlyForTheWholeTree(t *testing.T) {
	var leaves [][]byte
	for i := range 9 {
		h := sha256.Sum256([]byte{0, byte(i)})
		leaves = append(leaves, h[:])
	}
	root := mth(leaves)
	cases := map[string]func(v *verifier){
		"a leaf hash flipped": func(v *verifier) { v.b.Entries[4].LeafHash = bytes.Clone(root) },
		"a short leaf hash":   func(v *verifier) { v.b.Entries[4].LeafHash = v.b.Entries[4].LeafHash[:31] },
		"a leaf missing":      func(v *verifier) { v.b.Entries = v.b.Entries[:8] },
		"from index 1":        func(v *verifier) { v.b.Entries = v.b.Entries[1:] },
		"indexes shifted":     func(v *verifier) { v.b.Entries[8].Index = 9 },
		"a larger checkpoint": func(v *verifier) { v.cp.Size = 10 },
		"another root":        func(v *verifier) { v.cp.Hash = leaves[0] },
		"no checkpoint":       func(v *verifier) { v.cp = nil },
	}
	if newFullTree(treeVerifier(leaves, root)) == nil {
		t.Fatal("no tree for the untouched bundle")
	}
	for name, mutate := range cases {
		v := treeVerifier(leaves, root)
		mutate(v)
		if newFullTree(v) != nil {
			t.Errorf("%s: got a tree, want each proof walked", name)
		}
	}
}

func treeVerifier(leaves [][]byte, root []byte) *verifier {
	b := &Bundle{}
	for i, l := range leaves {
		b.Entries = append(b.Entries, Entry{Index: uint64(i), LeafHash: bytes.Clone(l)})
	}
	return &verifier{b: b, cp: &Checkpoint{Size: uint64(len(leaves)), Hash: bytes.Clone(root)}}
}
