package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"math/bits"
	"net/url"
	"slices"
)

// PieceLen is the shortest piece of a value of n bytes that a strict [Redactor] masks: half
// the value, at least 4 and at most 8 bytes, plus one byte for every KiB past the first (see
// stride). A piece shorter than that may pass, so whatever one window shows, at least half of
// a short value and all but 7 bytes of a token stay hidden; see the package doc for why pieces
// are masked at all and why not shorter ones.
func PieceLen(n int) int { return basePiece(n) + stride(n) - 1 }

// basePiece is PieceLen before the allowance for long values.
func basePiece(n int) int { return max(4, min(8, n/2)) }

// stride is the distance, in characters of a form, between the windows indexed for a value
// of n bytes: 1 up to 1 KiB, one more per KiB. A value of 64 KiB (the largest secret) would
// otherwise need over a million windows (13 s and 130 MiB to index); with the stride every
// value costs at most about 1,024 bytes' worth. A piece is then found from the first window
// inside it, so up to stride-1 characters before that pass: PieceLen allows for them.
func stride(n int) int { return (n + strideBytes - 1) / strideBytes }

const (
	strideBytes = 1024
	// maxMatch caps how far one match is followed. A longer run of a form is masked by the
	// overlapping matches after it, so what the writer holds back stays under maxMatch
	// skeleton bytes however long a value is.
	maxMatch = 2048
)

// keyLen is how many skeleton bytes the strict matcher's filter reads at a position: the
// shortest piece it masks in any form (4 bytes raw, when PieceLen is 4).
const keyLen = 4

// A strict form is a text derived from a value, and its kind: how much of the value a run of
// its characters can give away.
type strictForm struct {
	text []byte
	kind formKind
}

type formKind uint8

const (
	kindRaw    formKind = iota // the value's bytes (or a case-folded copy)
	kindHex                    // hex of the value
	kindB64                    // base64 of the value
	kindB64B64                 // base64 of the value's base64
	kindHexB64                 // hex of the value's base64
)

// revealed bounds the bits of a value that a reader learns from a run of c characters of a
// form of this kind together with the characters around it, which the matcher leaves: a
// base64 character at the edge of an encoded piece carries up to 4 bits of the piece beside
// bits of its neighbour (2 edges: 8 bits), and the same holds one level down for base64 of
// base64; a hex run's neighbour completes at most one more base64 character on each side.
func (k formKind) revealed(c int) int {
	switch k {
	case kindHex:
		return 4 * c
	case kindB64:
		return 6*c + 8
	case kindB64B64:
		return 6*((6*c+8)/8) + 8
	case kindHexB64:
		return 6*((c+2)/2) + 8
	}
	return 8 * c
}

// minPiece is the shortest run of a form of kind k that the matcher masks: the first that can
// give away pieceBits bits of the value, so that a shorter run, edges and all, never does.
func (k formKind) minPiece(pieceBits int) int {
	c := keyLen
	for k.revealed(c) < pieceBits {
		c++
	}
	return c
}

// strictForms returns the texts of v the strict matcher looks for pieces of, before
// normalization:
//
//   - v itself, lower-cased and upper-cased (a host may fold case), and its URL query
//     escaping when v holds a space (a "+" the skeleton keeps);
//   - base64, standard and URL-safe: the padded encoding and the stable core at each of the
//     three alignments (see base64Core);
//   - hex, lower and upper case;
//   - base64 (both alphabets, padded and cores) and hex of each standard base64 core: the
//     proxy itself base64-encodes a value into Basic credentials, and a host that reflects
//     its request headers in base64 or hex encodes that text again.
//
// URL, JSON, HTML and C escaping need no forms of their own: the skeleton decodes them.
func strictForms(v []byte) []strictForm {
	out := []strictForm{{v, kindRaw}, {bytes.ToLower(v), kindRaw}, {bytes.ToUpper(v), kindRaw}}
	if bytes.IndexByte(v, ' ') >= 0 {
		out = append(out, strictForm{[]byte(url.QueryEscape(string(v))), kindRaw})
	}
	b64 := func(t []byte, kind formKind) {
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
			out = append(out, strictForm{[]byte(enc.EncodeToString(t)), kind})
			for align := range 3 {
				out = append(out, strictForm{[]byte(base64Core(enc.WithPadding(base64.NoPadding), t, align)), kind})
			}
		}
	}
	hexes := func(t []byte, kind formKind) {
		h := hex.EncodeToString(t)
		out = append(out, strictForm{[]byte(h), kind}, strictForm{bytes.ToUpper([]byte(h)), kind})
	}
	b64(v, kindB64)
	hexes(v, kindHex)
	for align := range 3 {
		core := []byte(base64Core(base64.RawStdEncoding, v, align))
		b64(core, kindB64B64)
		hexes(core, kindHexB64)
	}
	return out
}

// fragIndex finds pieces of a value's strict forms in a skeleton: every window of keyLen bytes
// of every form, by its bytes, screened by a bitset over a hash of them.
type fragIndex struct {
	filter []uint64
	shift  uint                // 32 - log2(bits in filter)
	byKey  map[uint32][]window // windows by their first keyLen bytes
	forms  [][]byte            // normalized forms
	maxLen int                 // longest match followed: min(longest form, maxMatch); 0: nothing to mask
}

// window is a place in a form where a masked piece may start, and the shortest piece from
// there that is masked.
type window struct{ form, off, min int32 }

func newFragIndex(values [][]byte) *fragIndex {
	x := &fragIndex{byKey: map[uint32][]window{}}
	ids := map[string]int32{}
	type place struct{ form, off int32 }
	mins := map[place]int32{}
	var places []place
	for _, v := range values {
		if len(v) < MinLen {
			continue
		}
		piece, step := basePiece(len(v)), stride(len(v))
		for _, f := range strictForms(v) {
			var k skeleton
			for k.pos < len(f.text) {
				k.read(f.text, true)
			}
			id, ok := ids[string(k.skel)]
			if !ok {
				id = int32(len(x.forms))
				ids[string(k.skel)] = id
				x.forms = append(x.forms, k.skel)
				x.maxLen = max(x.maxLen, min(len(k.skel), maxMatch))
			}
			for j := 0; j+keyLen <= len(k.skel); j += step {
				m := f.kind.minPiece(8 * piece)
				if f.kind == kindRaw {
					// As written, a raw value may hold white space or escapes the skeleton
					// drops or shortens: a piece is masked once it spans that many bytes of it.
					for m = keyLen; j+m <= len(k.skel) && k.end(j+m-1)-int(k.from[j]) < piece; m++ {
					}
				}
				if j+m > len(k.skel) {
					continue
				}
				p := place{id, int32(j)}
				if old, ok := mins[p]; !ok || int32(m) < old {
					if !ok {
						places = append(places, p)
					}
					mins[p] = int32(m)
				}
			}
		}
	}
	for _, p := range places {
		k := binary.LittleEndian.Uint32(x.forms[p.form][p.off:])
		x.byKey[k] = append(x.byKey[k], window{p.form, p.off, mins[p]})
	}
	for k, ws := range x.byKey {
		x.byKey[k] = x.prune(ws)
	}
	size := 1 << 16
	for size < 16*len(x.byKey) && size < 1<<22 {
		size <<= 1
	}
	x.filter = make([]uint64, size/64)
	x.shift = uint(32 - bits.TrailingZeros(uint(size)))
	for k := range x.byKey {
		h := (k * hashMul32) >> x.shift
		x.filter[h>>6] |= 1 << (h & 63)
	}
	return x
}

const hashMul32 = 0x9E3779B1 // odd 32-bit constant (golden ratio) for multiplicative hashing

// prune drops the windows another window makes redundant: one whose text from there on is a
// prefix of the other's, with no longer a minimum, never finds a longer piece. A value that
// repeats itself ("aaaaaaaa") would otherwise have a window at each offset to extend at every
// position of a matching input.
func (x *fragIndex) prune(ws []window) []window {
	rest := func(w window) []byte { return x.forms[w.form][w.off:] }
	slices.SortStableFunc(ws, func(a, b window) int { return len(rest(b)) - len(rest(a)) })
	kept := ws[:0]
	for _, w := range ws {
		redundant := false
		for _, k := range kept {
			if k.min <= w.min && bytes.HasPrefix(rest(k), rest(w)) {
				redundant = true
				break
			}
		}
		if !redundant {
			kept = append(kept, w)
		}
	}
	return slices.Clip(kept)
}

// longestAt returns the length of the longest masked piece that b starts with, or 0; key is
// b's first keyLen bytes.
func (x *fragIndex) longestAt(b []byte, key uint32) int {
	best := 0
	for _, w := range x.byKey[key] {
		f := x.forms[w.form][w.off:]
		n := commonPrefix(b, f[:min(len(f), maxMatch)])
		if n >= int(w.min) && n > best {
			best = n
		}
	}
	return best
}

// commonPrefix returns how many leading bytes a and b share.
func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for ; i+8 <= n; i += 8 {
		if d := binary.LittleEndian.Uint64(a[i:]) ^ binary.LittleEndian.Uint64(b[i:]); d != 0 {
			return i + bits.TrailingZeros64(d)/8
		}
	}
	for ; i < n && a[i] == b[i]; i++ {
	}
	return i
}
