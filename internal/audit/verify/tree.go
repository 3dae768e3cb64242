package verify

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"runtime"
	"sync"
)

// fullTree is the RFC 6962 tree of a bundle that holds every entry of its checkpoint's tree,
// recomputed from the entries' recorded leaf hashes in one pass (n-1 node hashes) instead of
// walking each entry's inclusion proof (about log2(n) hashes each). Each level is the one
// below it paired up, a lone last node carried up unchanged, which is RFC 6962's split of a
// tree whose size is not a power of two.
type fullTree struct {
	levels [][][HashSize]byte // levels[0] are the leaves; the last level is the root alone
	inTree string             // the detail of a passing inclusion row, the same for every entry
}

// newFullTree returns the tree of v's entries when they are exactly the leaves 0..size-1 of
// the verified checkpoint's tree, each with a leaf hash of the right size, and the tree's
// root is the checkpoint's; otherwise nil, and each inclusion proof is checked on its own.
func newFullTree(v *verifier) *fullTree {
	es := v.b.Entries
	if v.cp == nil || uint64(len(es)) != v.cp.Size || len(es) == 0 {
		return nil
	}
	leaves := make([][HashSize]byte, len(es))
	for i, e := range es {
		if e.Index != uint64(i) || len(e.LeafHash) != HashSize {
			return nil
		}
		copy(leaves[i][:], e.LeafHash)
	}
	t := &fullTree{levels: [][][HashSize]byte{leaves}}
	for level := leaves; len(level) > 1; {
		up := make([][HashSize]byte, (len(level)+1)/2)
		parentsOf(up, level)
		t.levels = append(t.levels, up)
		level = up
	}
	if !bytes.Equal(t.levels[len(t.levels)-1][0][:], v.cp.Hash) {
		return nil
	}
	t.inTree = fmt.Sprintf("in the tree of size %d", v.cp.Size)
	return t
}

// parallelTreeFrom is the level width from which parentsOf hashes on every CPU.
const parallelTreeFrom = 8192

// parentsOf sets up[j] to the parent of level[2j] and level[2j+1], or to level[2j] when it
// is the lone last node. A wide level is split in equal runs of parents, one per CPU: the
// parents are independent of each other.
func parentsOf(up, level [][HashSize]byte) {
	workers := runtime.GOMAXPROCS(0)
	if len(up) < parallelTreeFrom || workers < 2 {
		hashParents(up, level, 0, len(up))
		return
	}
	chunk := (len(up) + workers - 1) / workers
	var wg sync.WaitGroup
	for from := 0; from < len(up); from += chunk {
		wg.Go(func() { hashParents(up, level, from, min(from+chunk, len(up))) })
	}
	wg.Wait()
}

// hashParents sets up[from:to] as parentsOf does.
func hashParents(up, level [][HashSize]byte, from, to int) {
	h := sha256.New()
	var buf [2*HashSize + 1]byte
	buf[0] = 1
	for j := from; j < to; j++ {
		if 2*j+1 == len(level) {
			up[j] = level[2*j]
			continue
		}
		copy(buf[1:], level[2*j][:])
		copy(buf[1+HashSize:], level[2*j+1][:])
		h.Reset()
		h.Write(buf[:])
		h.Sum(up[j][:0])
	}
}

// provesLeaf reports whether proof is exactly the audit path of leaf index: the sibling of
// its node at every level that has one, from the leaf up. With the root equal to the
// checkpoint's, that is when walking the proof from the recorded leaf hash reaches the root.
func (t *fullTree) provesLeaf(index uint64, proof [][]byte) bool {
	k := 0
	for _, level := range t.levels[:len(t.levels)-1] {
		if sib := index ^ 1; sib < uint64(len(level)) {
			if k >= len(proof) || !bytes.Equal(proof[k], level[sib][:]) {
				return false
			}
			k++
		}
		index >>= 1
	}
	return k == len(proof)
}
