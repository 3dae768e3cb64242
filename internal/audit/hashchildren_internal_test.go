package audit

import (
	"bytes"
	"crypto/sha256"
	"testing"

	"github.com/agora-dev/agora/internal/audit/verify"
)

// TestHashChildrenIsRFC6962: the tree's node hash is the merkle library's, byte for byte, for
// the two hashes the tree joins and for any other lengths (which it hands to the library).
func TestHashChildrenIsRFC6962(t *testing.T) {
	l, r := sha256.Sum256([]byte("left")), sha256.Sum256([]byte("right"))
	for _, c := range []struct{ l, r []byte }{{l[:], r[:]}, {r[:], l[:]}, {l[:], l[:]}, {l[:5], r[:]}, {nil, nil}} {
		if got, want := hashChildren(c.l, c.r), hasher.HashChildren(c.l, c.r); !bytes.Equal(got, want) {
			t.Errorf("hashChildren(%x, %x) = %x, want %x", c.l, c.r, got, want)
		}
	}
	if got, want := verify.LeafHash([]byte("entry")), hasher.HashLeaf([]byte("entry")); !bytes.Equal(got, want) {
		t.Errorf("LeafHash = %x, want %x", got, want)
	}
}
