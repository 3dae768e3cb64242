package verify

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// Attacks on the fast `agora verify` (the bundle scanner, its split of the
// entries across CPUs, the hash decoder and the full-tree recompute), attacking as a forger of
// bundles: every bundle below must get from the fast path exactly what the strict reading (and,
// for proofs, the walk of each proof) gives.

// largeBundle is a synthetic bundle above parallelScanFrom, written minified (compact) or as
// WriteBundle indents it: the shapes whose entries entriesParallel splits.
func redTeamLargeBundle(t *testing.T, compact bool) []byte {
	t.Helper()
	smallScanSplit(t)
	b := &Bundle{Format: Format, Entries: []Entry{}, Manifests: []Manifest{}}
	for i := range redTeamEntries {
		e := Entry{Index: uint64(i), Entry: []byte(fmt.Sprintf(`{"n":%d,"s":"},{\"index\":%d"}`, i, i+1)), LeafHash: bytes.Repeat([]byte{byte(i)}, 32)}
		for k := range 17 {
			e.InclusionProof = append(e.InclusionProof, bytes.Repeat([]byte{byte(i + k)}, 32))
		}
		b.Entries = append(b.Entries, e)
	}
	var buf bytes.Buffer
	if err := WriteBundle(&buf, b); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	if compact {
		var c bytes.Buffer
		if err := json.Compact(&c, data); err != nil {
			t.Fatal(err)
		}
		data = c.Bytes()
	}
	if len(data) < parallelScanFrom+parallelScanFrom/2 {
		t.Fatalf("fixture: %d bytes, too small to be read in parts", len(data))
	}
	return data
}

// splitGuesses are where entriesParallel guesses entries start with parts CPUs.
func splitGuesses(data []byte, parts int) []int {
	start := bytes.Index(data, []byte(`"entries":`))
	start += bytes.IndexByte(data[start:], '[') + 1
	for start < len(data) && strings.IndexByte(" \t\r\n", data[start]) >= 0 {
		start++
	}
	rest := len(data) - start
	var at []int
	for j := 1; j < parts; j++ {
		k := bytes.IndexByte(data[start+rest*j/parts:], '{')
		if k >= 0 {
			at = append(at, start+rest*j/parts+k)
		}
	}
	return at
}

// TestRedTeamScan_SplitPointTricks: bytes put exactly where the entries are split across CPUs
// (just before a guessed entry start, in its first key, inside the previous entry's last
// string) never make the parallel read take what the strict reading refuses or read another
// bundle: whitespace runs, an extra comma, a NUL, an escaped quote or backslash, a unicode
// escape, a '{' or "},{" inside a base64 string, a closed array. Held: a guess is accepted
// only when the previous part, read from a true entry start, lands exactly on it.
func TestRedTeamScan_SplitPointTricks(t *testing.T) {
	old := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(old)
	for compact, partsList := range map[bool][]int{true: {2, 5}, false: {3}} {
		base := redTeamLargeBundle(t, compact)
		for _, parts := range partsList {
			runtime.GOMAXPROCS(parts)
			// The untouched bundle is read in parts: the attacks below reach the split.
			start := bytes.Index(base, []byte(`"entries":`))
			start += bytes.IndexByte(base[start:], '[') + 1
			s := &scanner{b: base, i: start}
			s.ws()
			if _, ok := s.entriesParallel(); !ok {
				t.Fatalf("compact %v, %d parts: the untouched bundle is not read in parts", compact, parts)
			}
			for _, at := range splitGuesses(base, parts) {
				// at is a '{' starting an entry; before it "," and maybe whitespace; before
				// that the previous entry's "}".
				prevClose := bytes.LastIndexByte(base[:at], '}')
				lastQuote := bytes.LastIndexByte(base[:prevClose], '"')
				muts := map[string][]byte{
					"spaces before":        splice(base, at, at, bytes.Repeat([]byte(" "), 4096)),
					"tab and CR before":    splice(base, at, at, []byte("\t\r\n")),
					"NUL before":           splice(base, at, at, []byte{0}),
					"comma before":         splice(base, at, at, []byte(",")),
					"array closed before":  splice(base, at, at, []byte("],\"x\":[")),
					"object in object":     splice(base, at+1, at+1, []byte(`"x":{`)),
					"escaped first key":    splice(base, at+1, at+1, []byte(`"\u0069ndex":0,`)),
					"brace in base64":      splice(base, lastQuote, lastQuote, []byte("{")),
					"boundary in base64":   splice(base, lastQuote, lastQuote, []byte("},{")),
					"escaped quote":        splice(base, lastQuote, lastQuote, []byte(`\"`)),
					"backslash at split":   splice(base, lastQuote, lastQuote, []byte(`\\`)),
					"unicode escape":       splice(base, lastQuote-1, lastQuote, []byte(`\u003d`)),
					"entry cut at split":   splice(base, prevClose, at, []byte(",")),
					"entries swapped":      swapAround(base, prevClose, at),
					"a duplicate at split": splice(base, at, at, base[bytes.LastIndexByte(base[:prevClose], '{'):at]),
				}
				for name, data := range muts {
					t.Run(fmt.Sprintf("compact=%v/parts=%d/%d/%s", compact, parts, at, name), func(t *testing.T) {
						matchStrict(t, 0, data)
					})
				}
			}
		}
	}
}

// redTeamEntries is the size of the attack bundles: a few split points apart, above the
// threshold smallScanSplit sets (about 140 KB minified, 16 entries a part at 9 parts).
const redTeamEntries = 150

// smallScanSplit lowers the size from which entries are read in parts to 64 KiB for the
// test, so the attacks run on small bundles; the split is the same code at any size. Each
// attack parses its bundle four times under -race: the bundle's size is most of the
// package's CPU.
func smallScanSplit(t *testing.T) {
	old := parallelScanFrom
	parallelScanFrom = 64 << 10
	t.Cleanup(func() { parallelScanFrom = old })
}

func splice(b []byte, from, to int, with []byte) []byte {
	out := append(append(bytes.Clone(b[:from]), with...), b[to:]...)
	return out
}

// swapAround swaps the entry ending at prevClose with the one starting at at.
func swapAround(b []byte, prevClose, at int) []byte {
	prevOpen := bytes.LastIndexByte(b[:prevClose], '{')
	// The next entry ends at the first "}" after its inclusion proof's "]".
	end := at + bytes.IndexByte(b[at:], ']')
	end += bytes.IndexByte(b[end:], '}') + 1
	var out []byte
	out = append(out, b[:prevOpen]...)
	out = append(out, b[at:end]...)
	out = append(out, b[prevClose+1:at]...)
	out = append(out, b[prevOpen:prevClose+1]...)
	out = append(out, b[end:]...)
	return out
}

// TestRedTeamScan_ParallelMatchesOnePart: with 2 to 9 CPUs (a few counts) the entries read in parts are the
// entries read by one reader, in order, none lost or repeated at a split.
func TestRedTeamScan_ParallelMatchesOnePart(t *testing.T) {
	old := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(old)
	data := redTeamLargeBundle(t, true)
	start := bytes.Index(data, []byte(`"entries":[`)) + len(`"entries":[`)
	one := &scanner{b: data, i: start}
	want, done, ok := one.entriesUntil(-1)
	if !ok || !done || len(want) != redTeamEntries {
		t.Fatalf("one part: ok %v done %v, %d entries", ok, done, len(want))
	}
	for _, parts := range []int{2, 3, 4, 7, 9} {
		runtime.GOMAXPROCS(parts)
		s := &scanner{b: data, i: start}
		got, ok := s.entriesParallel()
		if !ok || !reflect.DeepEqual(got, want) || s.i != one.i {
			t.Errorf("%d parts: ok %v, %d entries, end %d; one part: %d entries, end %d", parts, ok, len(got), s.i, len(want), one.i)
		}
	}
}

// TestRedTeamScan_FullTreeRowsAreTheWalksRows: a bundle of the whole log (so the tree is
// recomputed from its leaves instead of walking each proof) whose proofs are forged gets, row
// for row, what walking each proof gives: garbage proofs, a neighbour's proof, a proof one
// hash too long or short, reordered, with the root or the leaf itself appended, empty, and a
// leaf hash replaced by an interior node (a second-preimage try). Held: the recompute only
// ever passes a proof that is the exact path, and anything else is walked.
func TestRedTeamScan_FullTreeRowsAreTheWalksRows(t *testing.T) {
	for _, n := range []int{1, 2, 3, 7, 64, 100} {
		var leaves [][]byte
		for i := range n {
			h := sha256.Sum256([]byte{0, byte(i), byte(i >> 8), 0xa5})
			leaves = append(leaves, h[:])
		}
		root := mth(leaves)
		proofs := make([][][]byte, n)
		for m := range n {
			proofs[m] = path(m, leaves)
		}
		garbage := func(i int) []byte { h := sha256.Sum256([]byte{byte(i), 0xee}); return h[:] }
		muts := map[string]func(es []Entry){
			"untouched": func([]Entry) {},
			"garbage proofs": func(es []Entry) {
				for i := range es {
					for k := range es[i].InclusionProof {
						es[i].InclusionProof[k] = garbage(i*64 + k)
					}
				}
			},
			"neighbour's proof": func(es []Entry) { es[n/2].InclusionProof = proofs[(n/2+1)%n] },
			"one hash more":     func(es []Entry) { es[n-1].InclusionProof = append(clone2(proofs[n-1]), root) },
			"leaf appended":     func(es []Entry) { es[0].InclusionProof = append(clone2(proofs[0]), leaves[0]) },
			"one hash less": func(es []Entry) {
				if len(proofs[0]) > 0 {
					es[0].InclusionProof = proofs[0][:len(proofs[0])-1]
				}
			},
			"reordered": func(es []Entry) {
				p := clone2(proofs[n/2])
				if len(p) > 1 {
					p[0], p[1] = p[1], p[0]
				}
				es[n/2].InclusionProof = p
			},
			"empty proofs": func(es []Entry) {
				for i := range es {
					es[i].InclusionProof = [][]byte{}
				}
			},
			"nil proofs": func(es []Entry) {
				for i := range es {
					es[i].InclusionProof = nil
				}
			},
			"interior node as leaf": func(es []Entry) {
				if n >= 2 {
					es[0].LeafHash = mth(leaves[:2])
					es[0].InclusionProof = proofs[0][1:]
				}
			},
		}
		for name, mutate := range muts {
			t.Run(fmt.Sprintf("n=%d/%s", n, name), func(t *testing.T) {
				mk := func() *verifier {
					v := treeVerifier(leaves, root)
					for i := range v.b.Entries {
						v.b.Entries[i].InclusionProof = clone2(proofs[i])
					}
					mutate(v.b.Entries)
					v.rep = &Report{}
					return v
				}
				fast, walk := mk(), mk()
				fast.tree = newFullTree(fast)
				if name == "untouched" && fast.tree == nil {
					t.Fatal("no tree for the whole log: the recompute is not exercised")
				}
				for _, e := range fast.b.Entries {
					fast.checkInclusion(e, fmt.Sprint(e.Index))
				}
				for _, e := range walk.b.Entries {
					walk.checkInclusion(e, fmt.Sprint(e.Index))
				}
				if !reflect.DeepEqual(fast.rep.Checks, walk.rep.Checks) {
					t.Errorf("rows with the recomputed tree differ from walking each proof:\n%v\n%v", fast.rep.Checks, walk.rep.Checks)
				}
				if name == "garbage proofs" && n > 1 {
					for _, r := range fast.rep.Checks {
						if r.OK {
							t.Errorf("a garbage proof passed: %+v", r)
						}
					}
				}
			})
		}
	}
}

func clone2(p [][]byte) [][]byte {
	out := make([][]byte, len(p))
	for i := range p {
		out[i] = bytes.Clone(p[i])
	}
	return out
}
