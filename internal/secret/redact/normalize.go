package redact

import (
	"slices"
	"sync"
	"unicode/utf8"
)

// The strict matcher ([NewStrict]) does not look for forms in the text as written but in its
// skeleton: the text with white space dropped and escapes decoded, each skeleton byte
// remembering the input it came from. A value wrapped every 76 characters, hex with spaces
// between the bytes, or JSON with every character \u-escaped is then one contiguous run, and a
// match maps back to the whole span of input it covers, line breaks and escapes included.
//
// Units, read left to right, one pass (no second round of decoding):
//
//   - white space (space, \t, \n, \r, \v, \f): dropped;
//   - %XX: the byte XX;
//   - \uXXXX (a surrogate pair as one character), \xXX, \NNN (octal), \" \\ \/ \' and the
//     one-letter C escapes \a \b \f \n \r \t \v: what they stand for;
//   - &#N; and &#xH; (HTML numeric character references): the character, UTF-8;
//   - any other byte, and an escape that is not one of these: itself.
//
// A decoded character that is white space is dropped like one. A match may skip at most
// maxGap input bytes of dropped white space between two of its bytes: a longer run ends the
// segment, so what the matcher holds back stays bounded whatever the input.
const (
	maxGap = 16
	// needEscape is the most input one unit reads (\uD83D\uDE00); a possible escape nearer
	// the end of a stream than this waits for more input.
	needEscape = 12
)

// Byte classes of the normalizer.
const (
	classPlain  = iota // copied to the skeleton
	classSpace         // dropped
	classEscape        // may start an escape: % \ &
)

// byteClasses is the class of every byte, built on first use.
var byteClasses = sync.OnceValue(func() *[256]uint8 {
	var t [256]uint8
	for _, c := range []byte(" \t\n\r\v\f") {
		t[c] = classSpace
	}
	for _, c := range []byte(`%\&`) {
		t[c] = classEscape
	}
	return &t
})

func isSpaceByte(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', '\v', '\f':
		return true
	}
	return false
}

func hexVal(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// hexN reads len(b) hex digits.
func hexN(b []byte) (rune, bool) {
	var r rune
	for _, c := range b {
		v, ok := hexVal(c)
		if !ok {
			return 0, false
		}
		r = r<<4 | rune(v)
	}
	return r, true
}

// decodeUnit reads the escape at the start of b (b[0] is % \ or &). It returns the bytes it
// stands for (in dec, n of them) and the input it spans; span 0 means b may be the start of
// an escape that is not complete yet (only when !final). A byte that starts no escape is a
// unit of one byte standing for itself.
func decodeUnit(b []byte, final bool, dec *[utf8.UTFMax]byte) (n, span int) {
	literal := func() (int, int) { dec[0] = b[0]; return 1, 1 }
	short := func(need int) bool { return len(b) < need && !final }
	switch b[0] {
	case '%':
		if short(3) {
			return 0, 0
		}
		if len(b) >= 3 {
			if r, ok := hexN(b[1:3]); ok {
				dec[0] = byte(r)
				return 1, 3
			}
		}
		return literal()
	case '\\':
		if short(2) {
			return 0, 0
		}
		if len(b) < 2 {
			return literal()
		}
		switch c := b[1]; c {
		case 'u':
			if short(6) {
				return 0, 0
			}
			if len(b) < 6 {
				return literal()
			}
			r, ok := hexN(b[2:6])
			if !ok {
				return literal()
			}
			if 0xD800 <= r && r < 0xDC00 {
				if short(12) {
					return 0, 0
				}
				if len(b) >= 12 && b[6] == '\\' && b[7] == 'u' {
					if lo, ok := hexN(b[8:12]); ok && 0xDC00 <= lo && lo < 0xE000 {
						return utf8.EncodeRune(dec[:], 0x10000+(r-0xD800)<<10+(lo-0xDC00)), 12
					}
				}
				return literal()
			}
			if 0xDC00 <= r && r < 0xE000 {
				return literal()
			}
			return utf8.EncodeRune(dec[:], r), 6
		case 'x':
			if short(4) {
				return 0, 0
			}
			if len(b) >= 4 {
				if r, ok := hexN(b[2:4]); ok {
					dec[0] = byte(r)
					return 1, 4
				}
			}
			return literal()
		case '0', '1', '2', '3':
			if short(4) {
				return 0, 0
			}
			if len(b) >= 4 && '0' <= b[2] && b[2] <= '7' && '0' <= b[3] && b[3] <= '7' {
				dec[0] = (c-'0')<<6 | (b[2]-'0')<<3 | (b[3] - '0')
				return 1, 4
			}
			return literal()
		case '"', '\\', '/', '\'':
			dec[0] = c
			return 1, 2
		case 'a':
			dec[0] = '\a'
			return 1, 2
		case 'b':
			dec[0] = '\b'
			return 1, 2
		case 'f', 'n', 'r', 't', 'v':
			dec[0] = ' ' // white space: dropped like the character itself
			return 1, 2
		}
		return literal()
	case '&':
		return decodeCharRef(b, final, dec)
	}
	return literal()
}

// decodeCharRef reads an HTML numeric character reference, &#N; or &#xH;, at the start of b.
func decodeCharRef(b []byte, final bool, dec *[utf8.UTFMax]byte) (n, span int) {
	const longest = len("&#x10FFFF;")
	end := -1
	for i := 1; i < min(len(b), longest); i++ {
		if b[i] == ';' {
			end = i
			break
		}
	}
	if end < 0 {
		if len(b) < longest && !final {
			return 0, 0
		}
		dec[0] = b[0]
		return 1, 1
	}
	if b[1] != '#' || end < 3 {
		dec[0] = b[0]
		return 1, 1
	}
	digits := b[2:end]
	var r rune
	var ok bool
	if digits[0] == 'x' || digits[0] == 'X' {
		if len(digits) > 1 && len(digits) <= 7 {
			r, ok = hexN(digits[1:])
		}
	} else if len(digits) <= 7 {
		ok = true
		for _, c := range digits {
			if c < '0' || c > '9' {
				ok = false
				break
			}
			r = r*10 + rune(c-'0')
		}
	}
	if !ok || r > utf8.MaxRune || (0xD800 <= r && r < 0xE000) {
		dec[0] = b[0]
		return 1, 1
	}
	return utf8.EncodeRune(dec[:], r), end + 1
}

// skeleton is a normalized run of input: skel[i] came from in[from[i]], one byte of it, or
// from an escape: a run of esc names the skeleton bytes each escape gave and the input it
// spans. Escapes are rare in most text, so a plain byte costs one offset, not a unit length.
type skeleton struct {
	skel []byte
	from []int32
	esc  []escape
	gap  int // white space bytes since the last skeleton byte
	pos  int // next input byte to read
}

// escape is a unit of more than one input byte: skeleton bytes [skel, skel+n) came from
// in[from[skel] : from[skel]+span].
type escape struct {
	skel int32
	n    uint8
	span uint8
}

// escapeAt returns the index in esc of the escape that gave skeleton byte i, or -1.
func (k *skeleton) escapeAt(i int) int {
	lo, hi := 0, len(k.esc)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if int(k.esc[m].skel) <= i {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if j := lo - 1; j >= 0 && i < int(k.esc[j].skel)+int(k.esc[j].n) {
		return j
	}
	return -1
}

// end is the end in the input of the unit skeleton byte i came from.
func (k *skeleton) end(i int) int {
	if j := k.escapeAt(i); j >= 0 {
		return int(k.from[i]) + int(k.esc[j].span)
	}
	return int(k.from[i]) + 1
}

// drop forgets the first n skeleton bytes.
func (k *skeleton) drop(n int) {
	if n == 0 {
		return
	}
	k.skel = k.skel[:copy(k.skel, k.skel[n:])]
	k.from = k.from[:copy(k.from, k.from[n:])]
	j := 0
	for j < len(k.esc) && int(k.esc[j].skel)+int(k.esc[j].n) <= n {
		j++
	}
	k.esc = k.esc[:copy(k.esc, k.esc[j:])]
	for i := range k.esc {
		k.esc[i].skel -= int32(n)
	}
}

// read normalizes in[k.pos:] into the skeleton. It stops at the end of in, before an escape
// that may still be incomplete (unless final), or right after a white space run grows past
// maxGap: it then reports that the segment ended.
//
// No unit decodes to more bytes than it spans, so the skeleton grows by at most the input
// left: room for that is made once, and the loop writes by index (this loop and decide's are
// where the strict matcher spends its time).
func (k *skeleton) read(in []byte, final bool) (segmentEnd bool) {
	classes := byteClasses()
	n, pos, gap := len(k.skel), k.pos, k.gap
	skel := slices.Grow(k.skel, len(in)-pos)[:n+len(in)-pos]
	from := slices.Grow(k.from, len(in)-pos)[:n+len(in)-pos]
	defer func() {
		k.skel, k.from, k.pos, k.gap = skel[:n], from[:n], pos, gap
	}()
	var dec [utf8.UTFMax]byte
	for pos < len(in) {
		c := in[pos]
		switch classes[c] {
		case classPlain:
			skel[n], from[n] = c, int32(pos)
			n, pos, gap = n+1, pos+1, 0
		case classSpace:
			pos++
			if gap++; gap == maxGap+1 {
				return true
			}
		default:
			dn, span := decodeUnit(in[pos:], final, &dec)
			if span == 0 {
				return false
			}
			if dn == 1 && isSpaceByte(dec[0]) {
				before := gap
				pos += span
				if gap += span; before <= maxGap && gap > maxGap {
					return true
				}
				continue
			}
			if span > 1 {
				k.esc = append(k.esc, escape{skel: int32(n), n: uint8(dn), span: uint8(span)})
			}
			for _, c := range dec[:dn] {
				skel[n], from[n] = c, int32(pos)
				n++
			}
			pos, gap = pos+span, 0
		}
	}
	return false
}
