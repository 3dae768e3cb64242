package audit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"math/bits"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/agora-dev/agora/internal/store"
)

// RFC 6962 test vectors as published with transparency-dev/merkle (testonly/constants.go and
// proof/verify_test.go), which took them from the Certificate Transparency reference code.
var (
	vectorLeaves = []string{"", "00", "10", "2021", "3031", "40414243", "5051525354555657", "606162636465666768696a6b6c6d6e6f"}
	vectorRoots  = []string{
		"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		"6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
		"fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
		"aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
		"d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
		"4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
		"76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
		"ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
		"5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
	}
	// index is 0-based here; the published table counts leaves from 1.
	vectorInclusion = []struct {
		index, size uint64
		proof       []string
	}{
		{0, 1, nil},
		{0, 8, []string{"96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7", "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e", "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"}},
		{5, 8, []string{"bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b", "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0", "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"}},
		{2, 3, []string{"fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"}},
		{1, 5, []string{"6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d", "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e", "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"}},
	}
	vectorConsistency = []struct {
		size1, size2 uint64
		proof        []string
	}{
		{1, 1, nil},
		{1, 8, []string{"96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7", "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e", "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"}},
		{6, 8, []string{"0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a", "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0", "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"}},
		{2, 5, []string{"5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e", "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"}},
		{6, 7, []string{"0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a", "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f", "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"}},
	}
)

func hx(tb testing.TB, s string) []byte {
	tb.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func hexAll(p [][]byte) []string {
	out := []string{}
	for _, h := range p {
		out = append(out, hex.EncodeToString(h))
	}
	return out
}

// treeOf stores a tree over the given leaf inputs (as entries) through the same code Append uses.
func treeOf(tb testing.TB, leaves [][]byte) *store.DB {
	tb.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(tb.TempDir(), "t.db"), Migrations)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	err = db.Tx(ctx, func(tx *sql.Tx) error {
		r := rangeFactory.NewEmptyRange(0)
		for i, l := range leaves {
			// Leaf hashes live in audit_entries, the entry being the leaf's input.
			if _, err := tx.Exec(`INSERT INTO audit_entries(seq, at, kind, subject, actor, entry, leaf_hash) VALUES (?, '', 'test', '', '', ?, ?)`,
				i, l, hasher.HashLeaf(l)); err != nil {
				return err
			}
			if err := appendLeaf(ctx, tx, r, hasher.HashLeaf(l), false); err != nil {
				return err
			}
		}
		return saveTree(ctx, tx, r)
	})
	if err != nil {
		tb.Fatal(err)
	}
	return db
}

func TestTree_RFC6962Vectors(t *testing.T) {
	var leaves [][]byte
	for _, l := range vectorLeaves {
		leaves = append(leaves, hx(t, l))
	}
	db := treeOf(t, leaves)
	ctx := t.Context()
	for size, want := range vectorRoots {
		got, err := RootAt(ctx, db.SQL(), uint64(size))
		if err != nil {
			t.Fatal(err)
		}
		if hex.EncodeToString(got) != want {
			t.Errorf("root at %d: got %x, want %s", size, got, want)
		}
	}
	for _, v := range vectorInclusion {
		t.Run(fmt.Sprintf("inclusion %d in %d", v.index, v.size), func(t *testing.T) {
			got, err := InclusionProof(ctx, db.SQL(), v.index, v.size)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(append([]string{}, v.proof...), hexAll(got)); diff != "" {
				t.Errorf("proof (-want +got):\n%s", diff)
			}
		})
	}
	for _, v := range vectorConsistency {
		t.Run(fmt.Sprintf("consistency %d to %d", v.size1, v.size2), func(t *testing.T) {
			got, err := ConsistencyProof(ctx, db.SQL(), v.size1, v.size2)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(append([]string{}, v.proof...), hexAll(got)); diff != "" {
				t.Errorf("proof (-want +got):\n%s", diff)
			}
		})
	}
}

// The literal RFC 6962 section 2.1 definitions, recursive and slow on purpose.

func refMTH(d [][]byte) []byte {
	switch len(d) {
	case 0:
		s := sha256.Sum256(nil)
		return s[:]
	case 1:
		s := sha256.Sum256(append([]byte{0}, d[0]...))
		return s[:]
	}
	k := refSplit(len(d))
	s := sha256.Sum256(append(append([]byte{1}, refMTH(d[:k])...), refMTH(d[k:])...))
	return s[:]
}

// refSplit is the largest power of two smaller than n.
func refSplit(n int) int { return 1 << (bits.Len(uint(n-1)) - 1) }

func refPath(m int, d [][]byte) [][]byte {
	if len(d) == 1 {
		return nil
	}
	k := refSplit(len(d))
	if m < k {
		return append(refPath(m, d[:k]), refMTH(d[k:]))
	}
	return append(refPath(m-k, d[k:]), refMTH(d[:k]))
}

func refProof(m int, d [][]byte) [][]byte { return refSubproof(m, d, true) }

func refSubproof(m int, d [][]byte, b bool) [][]byte {
	n := len(d)
	if m == n {
		if b {
			return nil
		}
		return [][]byte{refMTH(d)}
	}
	k := refSplit(n)
	if m <= k {
		return append(refSubproof(m, d[:k], b), refMTH(d[k:]))
	}
	return append(refSubproof(m-k, d[k:], false), refMTH(d[:k]))
}

func TestTree_MatchesReference(t *testing.T) {
	const n = 37
	var leaves [][]byte
	for i := range n {
		leaves = append(leaves, []byte(fmt.Sprintf("leaf %d", i)))
	}
	db := treeOf(t, leaves)
	ctx := t.Context()
	for size := 0; size <= n; size++ {
		root, err := RootAt(ctx, db.SQL(), uint64(size))
		if err != nil {
			t.Fatal(err)
		}
		if want := refMTH(leaves[:size]); !bytes.Equal(root, want) {
			t.Fatalf("root at %d: got %x, want %x", size, root, want)
		}
		for i := 0; i < size; i++ {
			got, err := InclusionProof(ctx, db.SQL(), uint64(i), uint64(size))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(hexAll(refPath(i, leaves[:size])), hexAll(got)); diff != "" {
				t.Fatalf("inclusion %d in %d (-want +got):\n%s", i, size, diff)
			}
		}
		for m := 1; m <= size; m++ {
			got, err := ConsistencyProof(ctx, db.SQL(), uint64(m), uint64(size))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(hexAll(refProof(m, leaves[:size])), hexAll(got)); diff != "" {
				t.Fatalf("consistency %d to %d (-want +got):\n%s", m, size, diff)
			}
		}
	}
}

// TestTree_MatchesTlog cross-checks roots and proofs with golang.org/x/mod/sumdb/tlog, an
// independent RFC 6962 implementation.
func TestTree_MatchesTlog(t *testing.T) {
	const n = 70
	var leaves [][]byte
	var stored []tlog.Hash
	for i := range n {
		leaves = append(leaves, []byte(fmt.Sprintf("record %d", i)))
		hs, err := tlog.StoredHashes(int64(i), leaves[i], tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
			out := make([]tlog.Hash, len(idx))
			for j, x := range idx {
				out[j] = stored[x]
			}
			return out, nil
		}))
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, hs...)
	}
	reader := tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for j, x := range idx {
			out[j] = stored[x]
		}
		return out, nil
	})
	db := treeOf(t, leaves)
	ctx := t.Context()
	for _, size := range []int64{1, 2, 3, 16, 31, 64, 70} {
		root, err := RootAt(ctx, db.SQL(), uint64(size))
		if err != nil {
			t.Fatal(err)
		}
		th, err := tlog.TreeHash(size, reader)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(root, th[:]) {
			t.Fatalf("root at %d: ours %x, tlog %x", size, root, th)
		}
		for _, i := range []int64{0, size / 2, size - 1} {
			p, err := InclusionProof(ctx, db.SQL(), uint64(i), uint64(size))
			if err != nil {
				t.Fatal(err)
			}
			if err := tlog.CheckRecord(toTlog(p), size, th, i, tlog.RecordHash(leaves[i])); err != nil {
				t.Errorf("tlog rejects our inclusion proof of %d in %d: %v", i, size, err)
			}
		}
		for _, m := range []int64{1, size / 2, size - 1} {
			if m < 1 {
				continue
			}
			p, err := ConsistencyProof(ctx, db.SQL(), uint64(m), uint64(size))
			if err != nil {
				t.Fatal(err)
			}
			old, _ := tlog.TreeHash(m, reader)
			if err := tlog.CheckTree(tlog.TreeProof(toTlog(p)), size, th, m, old); err != nil {
				t.Errorf("tlog rejects our consistency proof %d to %d: %v", m, size, err)
			}
		}
	}
}

func toTlog(p [][]byte) []tlog.Hash {
	out := make([]tlog.Hash, len(p))
	for i, h := range p {
		copy(out[i][:], h)
	}
	return out
}
