package verify

import (
	"crypto/sha256"
	"testing"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

// mth is the RFC 6962 Merkle tree hash of leaves (leaf hashes), computed naively.
func mth(leaves [][]byte) []byte {
	if len(leaves) == 1 {
		return leaves[0]
	}
	k := 1
	for k*2 < len(leaves) {
		k *= 2
	}
	l, r := mth(leaves[:k]), mth(leaves[k:])
	h := sha256.Sum256(append(append([]byte{1}, l...), r...))
	return h[:]
}

// path is RFC 6962's PATH(m, D[n]): the audit path of leaf m.
func path(m int, leaves [][]byte) [][]byte {
	if len(leaves) <= 1 {
		return nil
	}
	k := 1
	for k*2 < len(leaves) {
		k *= 2
	}
	if m < k {
		return append(path(m, leaves[:k]), mth(leaves[k:]))
	}
	return append(path(m-k, leaves[k:]), mth(leaves[:k]))
}

// TestInclusionChecker_MatchesLibrary checks the reusing checker against the library's
// proof.VerifyInclusion on every leaf of every tree up to 70 leaves, with the right proof and
// with broken ones: both must agree, accepting exactly the right proofs.
func TestInclusionChecker_MatchesLibrary(t *testing.T) {
	c := newInclusionChecker()
	var leaves [][]byte
	for n := 1; n <= 70; n++ {
		h := sha256.Sum256([]byte{0, byte(n), byte(n >> 8)})
		leaves = append(leaves, h[:])
		root := mth(leaves)
		for m := 0; m < n; m++ {
			good := path(m, leaves)
			cases := map[string]struct {
				index uint64
				proof [][]byte
				ok    bool
			}{"right proof": {uint64(m), good, true}}
			if len(good) > 0 {
				flipped := append([][]byte{}, good...)
				b := append([]byte{}, flipped[0]...)
				b[3] ^= 1
				flipped[0] = b
				cases["flipped hash"] = struct {
					index uint64
					proof [][]byte
					ok    bool
				}{uint64(m), flipped, false}
				cases["truncated"] = struct {
					index uint64
					proof [][]byte
					ok    bool
				}{uint64(m), good[:len(good)-1], false}
			}
			cases["extended"] = struct {
				index uint64
				proof [][]byte
				ok    bool
			}{uint64(m), append(append([][]byte{}, good...), root), false}
			if n > 1 {
				cases["other index"] = struct {
					index uint64
					proof [][]byte
					ok    bool
				}{uint64((m + 1) % n), good, false}
			}
			for name, tc := range cases {
				lib := proof.VerifyInclusion(rfc6962.DefaultHasher, tc.index, uint64(n), leaves[m], tc.proof, root) == nil
				ours := c.verify(tc.index, uint64(n), leaves[m], tc.proof, root) == nil
				if lib != ours || ours != tc.ok {
					// Another index can be right by coincidence only if the leaves are equal.
					t.Errorf("n=%d m=%d %s: library %v, ours %v, want %v", n, m, name, lib, ours, tc.ok)
				}
			}
		}
	}
	if err := c.verify(5, 5, leaves[0], nil, leaves[0]); err == nil {
		t.Error("index == size accepted")
	}
}
