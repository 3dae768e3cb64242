package verify

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"testing"
)

// mth is RFC 6962 §2.1's Merkle tree hash, written as the RFC states it.
func mth(leaves [][]byte) []byte {
	switch len(leaves) {
	case 0:
		h := sha256.Sum256(nil)
		return h[:]
	case 1:
		return leaves[0]
	}
	k := 1
	for k*2 < len(leaves) {
		k *= 2
	}
	return hashChildren(mth(leaves[:k]), mth(leaves[k:]))
}

// TestRootsAt: the one-pass roots verify checks a bucket's earlier anchors with are RFC 6962's
// tree hash of every prefix size.
func TestRootsAt(t *testing.T) {
	var leaves [][]byte
	var names []string
	for i := range 130 {
		h := sha256.Sum256([]byte{0, byte(i)})
		leaves = append(leaves, h[:])
		names = append(names, fmt.Sprintf("anchors/agora/%020d", i+1))
	}
	got := rootsAt(leaves, names)
	for k := 1; k <= len(leaves); k++ {
		if !bytes.Equal(got[uint64(k)], mth(leaves[:k])) {
			t.Fatalf("root of the first %d leaves differs from RFC 6962's", k)
		}
	}
}
