package verify

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
)

// inclusionChecker verifies RFC 6962 inclusion proofs with one reused SHA-256 state. It is
// the algorithm of RFC 9162 section 2.1.3.2; github.com/transparency-dev/merkle's
// proof.VerifyInclusion computes the same answer (TestInclusionChecker_MatchesLibrary checks
// them against each other on every proof of trees up to 70 leaves) but allocates a new hash
// state per node, which dominated verifying a 100,000-entry bundle.
type inclusionChecker struct {
	h   hash.Hash
	buf [2*HashSize + 1]byte
	sum [HashSize]byte
}

func newInclusionChecker() *inclusionChecker { return &inclusionChecker{h: sha256.New()} }

var errNotIncluded = errors.New("the proof does not lead to the checkpoint's root")

// verify checks that leafHash is at index in the tree of size whose root is root.
func (c *inclusionChecker) verify(index, size uint64, leafHash []byte, proof [][]byte, root []byte) error {
	if index >= size {
		return fmt.Errorf("index %d is beyond the tree size %d", index, size)
	}
	if len(leafHash) != HashSize || len(root) != HashSize {
		return fmt.Errorf("hashes must be %d bytes", HashSize)
	}
	fn, sn := index, size-1
	r := c.sum[:]
	copy(r, leafHash)
	for _, p := range proof {
		if len(p) != HashSize {
			return fmt.Errorf("proof hash of %d bytes, want %d", len(p), HashSize)
		}
		if sn == 0 {
			return fmt.Errorf("the proof is longer than the path: %w", errNotIncluded)
		}
		if fn&1 == 1 || fn == sn {
			c.node(p, r)
			for fn&1 == 0 && fn != 0 {
				fn >>= 1
				sn >>= 1
			}
		} else {
			c.node(r, p)
		}
		fn >>= 1
		sn >>= 1
	}
	if sn != 0 {
		return fmt.Errorf("the proof is shorter than the path: %w", errNotIncluded)
	}
	if !bytes.Equal(r, root) {
		return errNotIncluded
	}
	return nil
}

// node sets c.sum to SHA-256(0x01 || left || right); either may alias c.sum.
func (c *inclusionChecker) node(left, right []byte) {
	c.buf[0] = 1
	copy(c.buf[1:1+HashSize], left)
	copy(c.buf[1+HashSize:], right)
	c.h.Reset()
	c.h.Write(c.buf[:])
	c.h.Sum(c.sum[:0])
}

// pathMemo verifies inclusion proofs of entries in bundle order with about two hashes an entry
// instead of log2(n), in O(log n) memory: the streaming verifier's replacement for
// recomputing the whole tree ([fullTree]), which holds every leaf. The walk of
// [inclusionChecker.verify] is a function of its state after each proof hash (the node
// indexes fn and sn and the node hash r) and of the proof hashes still to come. pathMemo keeps
// the states and the proof of the last proof that verified; when a walk reaches, after the
// same number of hashes, the same state with the same hashes still to come, its end is that
// proof's end: the root, so it verifies. Consecutive entries' paths join a level or two up
// (half of them at the first), so the rest of each walk is a comparison of bytes. Any other
// proof is walked to its end, with the same answer and error as inclusionChecker.
type pathMemo struct {
	c  inclusionChecker
	ok bool // the last proof walked to the root; the rest is about it
	n  int  // its length
	// proof holds its hashes; fn, sn and r the state after each prefix of them.
	proof  [maxProofLen][HashSize]byte
	fn, sn [maxProofLen + 1]uint64
	r      [maxProofLen + 1][HashSize]byte
	root   [HashSize]byte
	size   uint64
}

func newPathMemo() *pathMemo { return &pathMemo{c: inclusionChecker{h: sha256.New()}} }

// verify is [inclusionChecker.verify].
func (m *pathMemo) verify(index, size uint64, leafHash []byte, proof [][]byte, root []byte) error {
	if index >= size {
		return fmt.Errorf("index %d is beyond the tree size %d", index, size)
	}
	if len(leafHash) != HashSize || len(root) != HashSize {
		return fmt.Errorf("hashes must be %d bytes", HashSize)
	}
	if len(proof) > maxProofLen {
		// No tree has a path this long: walked, it fails as inclusionChecker says.
		m.ok = false
		return m.c.verify(index, size, leafHash, proof, root)
	}
	// from is the first position from which every proof hash is the last proof's.
	from := len(proof)
	usable := m.ok && len(proof) == m.n && size == m.size && bytes.Equal(root, m.root[:])
	if usable {
		for from > 0 && len(proof[from-1]) == HashSize && bytes.Equal(proof[from-1], m.proof[from-1][:]) {
			from--
		}
	}
	fn, sn := index, size-1
	r := m.c.sum[:]
	copy(r, leafHash)
	// The states are written over the last proof's as the walk goes, each after it was compared:
	// a walk that fails leaves none usable (m.ok false).
	for j := 0; ; j++ {
		if usable && j >= from && fn == m.fn[j] && sn == m.sn[j] && bytes.Equal(r, m.r[j][:]) {
			// The last proof's walk from here reached the root. Its states from here on are
			// this proof's too; the hashes before j become this proof's.
			for k := range j {
				copy(m.proof[k][:], proof[k])
			}
			return nil
		}
		m.fn[j], m.sn[j] = fn, sn
		copy(m.r[j][:], r)
		if j == len(proof) {
			break
		}
		p := proof[j]
		if len(p) != HashSize {
			m.ok = false
			return fmt.Errorf("proof hash of %d bytes, want %d", len(p), HashSize)
		}
		if sn == 0 {
			m.ok = false
			return fmt.Errorf("the proof is longer than the path: %w", errNotIncluded)
		}
		if fn&1 == 1 || fn == sn {
			m.c.node(p, r)
			for fn&1 == 0 && fn != 0 {
				fn >>= 1
				sn >>= 1
			}
		} else {
			m.c.node(r, p)
		}
		fn >>= 1
		sn >>= 1
	}
	m.ok = false
	if sn != 0 {
		return fmt.Errorf("the proof is shorter than the path: %w", errNotIncluded)
	}
	if !bytes.Equal(r, root) {
		return errNotIncluded
	}
	m.ok, m.n, m.size = true, len(proof), size
	copy(m.root[:], root)
	for j, p := range proof {
		copy(m.proof[j][:], p)
	}
	return nil
}
