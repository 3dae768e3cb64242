package verify

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"path"
	"strconv"

	"github.com/agora-dev/agora/internal/audit/verify"
	"github.com/agora-dev/agora/internal/s3"
)

// s3EarlierAnchors checks the log's other anchors in the bucket that are smaller than the
// bundle's anchored checkpoint against the bundle's own entries: each must be the root of the
// bundle's first k leaves, every such anchor (one GET each). A forked log's checkpoint written
// by hand under a new size beside the honest anchors verified otherwise, since only the
// anchors the bundle names were read. It needs the bundle to hold every entry from index 0 (a plain full export);
// for any other selection, or anchors larger than the bundle, it checks nothing.
func s3EarlierAnchors(ctx context.Context, c *s3.Client, b *verify.Bundle, dir string, listed []s3.ListedVersion) []verify.Result {
	if b == nil || b.Anchored == nil || b.Selection.Kind != "" || len(b.Selection.Subjects) != 0 || b.Selection.FromIndex != 0 {
		return nil
	}
	anchoredSize, err := checkpointOf(b.Anchored.Checkpoint)
	if err != nil {
		return nil
	}
	leaves := make([][]byte, 0, len(b.Entries))
	for i, e := range b.Entries {
		if e.Index != uint64(i) {
			break
		}
		leaves = append(leaves, verify.LeafHash(e.Entry))
	}
	var rows []verify.Result
	var earlier []string
	for _, v := range listed {
		if v.DeleteMarker || path.Dir(v.Key)+"/" != dir {
			continue
		}
		size, err := strconv.ParseUint(path.Base(v.Key), 10, 64)
		if err != nil || size == 0 || size >= anchoredSize.Size || size > uint64(len(leaves)) {
			continue
		}
		earlier = append(earlier, v.Key)
	}
	// Every one: a window (the latest few) could be flooded with the fork's own anchors
	// written by hand, pushing the honest one it contradicts out of view.
	roots := rootsAt(leaves, earlier)
	for _, name := range earlier {
		size, _ := strconv.ParseUint(path.Base(name), 10, 64)
		item := truncateText(name, 80)
		obj, _, err := c.Get(ctx, name, "", verify.MaxCheckpointSize)
		if err != nil {
			rows = append(rows, verify.Result{Check: CheckS3Anchor, Item: item, Detail: err.Error()})
			continue
		}
		cp, err := checkpointOf(obj)
		if err != nil || cp.Size != size {
			rows = append(rows, verify.Result{Check: CheckS3Anchor, Item: item, Detail: "the bucket's object is not a checkpoint of its name's size"})
			continue
		}
		if cp.Origin != b.Origin || !bytes.Equal(cp.Hash, roots[size]) {
			rows = append(rows, verify.Result{Check: CheckS3Anchor, Item: item,
				Detail: fmt.Sprintf("the bucket's checkpoint %d is not the bundle's first %d entries: the log forked from the anchored history", size, size)})
			continue
		}
		rows = append(rows, verify.Result{Check: CheckS3Anchor, Item: item, OK: true,
			Detail: fmt.Sprintf("the bucket's earlier checkpoint %d is the bundle's first %d entries", size, size)})
	}
	return rows
}

// checkpointOf parses a signed checkpoint note's body (its signature is not checked: a
// mismatch is what is looked for).
func checkpointOf(note []byte) (verify.Checkpoint, error) {
	body, _, ok := bytes.Cut(note, []byte("\n\n"))
	if !ok {
		return verify.Checkpoint{}, fmt.Errorf("not a signed note")
	}
	return verify.ParseCheckpoint(append(body[:len(body):len(body)], '\n'))
}

// rootsAt returns the RFC 6962 Merkle tree hash of leaves[:k] for the size k of every name,
// in one pass over the leaves: a compact range (one subtree per binary digit of the size) is
// folded from the right at each wanted size, as MTH splits at the largest power of two.
func rootsAt(leaves [][]byte, names []string) map[uint64][]byte {
	want := map[uint64]bool{}
	for _, n := range names {
		k, _ := strconv.ParseUint(path.Base(n), 10, 64)
		want[k] = true
	}
	out := map[uint64][]byte{}
	type node struct {
		hash  []byte
		count uint64
	}
	var stack []node
	for i, l := range leaves {
		stack = append(stack, node{l, 1})
		for len(stack) > 1 && stack[len(stack)-1].count == stack[len(stack)-2].count {
			a, b := stack[len(stack)-2], stack[len(stack)-1]
			stack = append(stack[:len(stack)-2], node{hashChildren(a.hash, b.hash), a.count * 2})
		}
		if size := uint64(i + 1); want[size] {
			root := stack[len(stack)-1].hash
			for j := len(stack) - 2; j >= 0; j-- {
				root = hashChildren(stack[j].hash, root)
			}
			out[size] = root
		}
	}
	return out
}

func hashChildren(l, r []byte) []byte {
	h := sha256.New()
	h.Write([]byte{1})
	h.Write(l)
	h.Write(r)
	return h.Sum(nil)
}
