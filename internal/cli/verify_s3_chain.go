package cli

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

// maxEarlierAnchors bounds how many of a log's earlier anchors verify reads from the bucket
// (the latest ones below the bundle's anchored size).
const maxEarlierAnchors = 64

// s3EarlierAnchors checks the log's other anchors in the bucket that are smaller than the
// bundle's anchored checkpoint against the bundle's own entries: each must be the root of the
// bundle's first k leaves. A forked log's checkpoint written by hand under a new size beside
// the honest anchors verified otherwise, since only the anchors the bundle names were read
// (red team #31). It needs the bundle to hold every entry from index 0 (a plain full export);
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
	if len(earlier) > maxEarlierAnchors {
		earlier = earlier[len(earlier)-maxEarlierAnchors:]
	}
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
		if cp.Origin != b.Origin || !bytes.Equal(cp.Hash, treeHash(leaves[:size])) {
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

// treeHash is RFC 6962's Merkle tree hash of leaf hashes.
func treeHash(leaves [][]byte) []byte {
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
	h := sha256.New()
	h.Write([]byte{1})
	h.Write(treeHash(leaves[:k]))
	h.Write(treeHash(leaves[k:]))
	return h.Sum(nil)
}
