// Package redact masks known secret values, and the common encodings of them, in output: bytes at
// once ([Redactor.Bytes]) or a stream ([Redactor.Writer]).
//
// redact is the harmless piece of secret handling that both sides of the sandbox may use: the host
// passes worker output, logs and records through it, and the worker may wrap its own streams. It
// imports only the standard library and MUST NOT import [github.com/agora-dev/agora/internal/secret]
// or anything that holds keys or stores. It never prints, logs or returns the values it is given:
// a [Redactor] formats as a placeholder under every fmt verb.
//
// # What is masked
//
// Each value of at least [MinLen] bytes is masked as: the raw bytes; standard and URL-safe base64,
// padded and unpadded; the stable core of its base64 at each of the three byte alignments (a value
// inside a longer base64 blob changes only the characters at its edges, so the characters that
// depend on the value alone are masked when there are at least 8 of them); lowercase and uppercase
// hex; URL query and path escaping; and JSON string escaping (with and without HTML escaping).
// Shorter values are ignored: masking every "1" or "yes" would destroy the output while hiding
// almost nothing, and such values are too weak to be secrets worth the name.
//
// Every occurrence of every form is masked. Overlapping occurrences are merged into one [Mask], so
// the longest match wins and no byte of any occurrence survives; occurrences that merely touch get
// one [Mask] each.
//
// # Strict
//
// [NewStrict] is for values the reader must not learn even in part: the secrets the egress proxy
// swaps into requests, which a host may echo back to a sandbox that never held them. It matches
// on the text's skeleton (white space dropped, %XX, backslash and &#N; escapes decoded; see
// normalize.go), so wrapped base64, spaced hex and escaped strings are one run, and it masks any
// piece of any form that carries [PieceLen] bytes of a value: half the value, at least 4 and at
// most 8 bytes (one more per KiB past the first, so a long key's index stays small). Why pieces: a host that cuts a header to 40 characters shows a 33-byte prefix, and
// a prefix, a suffix and a middle are worth the same to a reader. Why not shorter: a window of 7
// bytes still leaves 9 bytes of a 16-byte token (and 57 of a 64-byte one) unknown, and masking
// every 4-byte fragment of a long value would mask ordinary text; why not longer: two windows (a
// prefix from one answer, a suffix from another) must not add up to the value, so the line
// cannot be "the value's length minus a margin". A strict Redactor scans a few times slower
// than [New] (docs/benchmarks-history.md#strict-masking-of-bound-hosts-responses-26-finding-11). What it cannot see: a value cut by the host into pieces
// shorter than PieceLen (two headers of 7 bytes each, or characters put between the bytes), an
// encoding it does not know (rot13, compression, UTF-16, a second round of escaping, mixed-case hex),
// and white space inside an escape ("%6\n7").
package redact

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
)

// MinLen is the shortest value, in bytes, that a [Redactor] masks.
const MinLen = 8

// Mask replaces each masked region.
const Mask = "[REDACTED]"

const (
	filterBits = 16
	hashMul    = 0x9E3779B97F4A7C15 // odd 64-bit constant (golden ratio) for multiplicative hashing
)

// Redactor masks a fixed set of values. It is immutable and safe for concurrent use.
//
// Every form is at least 8 bytes long, so a match is screened by its first 8 bytes: a bitset over
// a hash of those bytes rejects almost every position with one load and one multiply, and the few
// that pass look up the forms sharing that prefix. This is one pass over the input whatever the
// number of values.
type Redactor struct {
	filter   []uint64            // bit hash(prefix) set for every form's 8-byte prefix
	byPrefix map[uint64][][]byte // forms by their first 8 bytes (little endian), longest first
	maxLen   int                 // longest form; 0 when there is nothing to mask
	strict   *fragIndex          // set by NewStrict, which uses it instead of the fields above
}

// New builds a [Redactor] for values. Values shorter than [MinLen] are ignored (see the package
// doc). The values are copied.
func New(values [][]byte) *Redactor {
	r := &Redactor{filter: make([]uint64, 1<<filterBits/64), byPrefix: make(map[uint64][][]byte)}
	seen := make(map[string]bool)
	for _, v := range values {
		if len(v) < MinLen {
			continue
		}
		for _, f := range forms(v) {
			if seen[f] {
				continue
			}
			seen[f] = true
			k := binary.LittleEndian.Uint64([]byte(f))
			h := (k * hashMul) >> (64 - filterBits)
			r.filter[h>>6] |= 1 << (h & 63)
			r.byPrefix[k] = append(r.byPrefix[k], []byte(f))
			r.maxLen = max(r.maxLen, len(f))
		}
	}
	for _, fs := range r.byPrefix {
		slices.SortFunc(fs, func(a, b []byte) int { return len(b) - len(a) })
	}
	return r
}

// Empty reports whether r masks nothing (no value was at least [MinLen] bytes).
func (r *Redactor) Empty() bool {
	if r.strict != nil {
		return r.strict.maxLen == 0
	}
	return r.maxLen == 0
}

// Bytes returns a copy of b with every form of every value replaced by [Mask].
func (r *Redactor) Bytes(b []byte) []byte {
	if r.Empty() {
		return bytes.Clone(b)
	}
	if r.strict != nil {
		return r.strict.bytes(b)
	}
	var c cursor
	return r.advance(&c, b, len(b), make([]byte, 0, len(b)))
}

// String is [Redactor.Bytes] for a string.
func (r *Redactor) String(s string) string {
	return string(r.Bytes([]byte(s)))
}

// Format prints a placeholder under every verb, so a Redactor that ends up in a log line or an
// error never reveals the values it masks. It has a value receiver so that a copied Redactor is
// covered too.
func (r Redactor) Format(f fmt.State, _ rune) {
	io.WriteString(f, "redact.Redactor{redacted}")
}

// cursor is the state of a left-to-right redaction over a buffer. Offsets index the buffer.
type cursor struct {
	base      int // first byte neither emitted nor dropped
	next      int // next position to test as the start of a match
	regionEnd int // end of the latest masked region; a match starting before it extends it
}

// advance tests every position in [c.next, limit) as the start of a form and appends to out all
// output that is now final: unmasked bytes up to limit and one [Mask] per region. Every form
// starting before limit MUST lie wholly inside buf (or buf MUST end where the input ends).
func (r *Redactor) advance(c *cursor, buf []byte, limit int, out []byte) []byte {
	end := min(limit, len(buf)-7) // a form is at least 8 bytes
	for s := c.next; s < end; s++ {
		k := binary.LittleEndian.Uint64(buf[s:])
		h := (k * hashMul) >> (64 - filterBits)
		if r.filter[h>>6]&(1<<(h&63)) == 0 {
			continue
		}
		n := r.longestAt(buf[s:], k)
		if n == 0 {
			continue
		}
		if s < c.regionEnd {
			c.regionEnd = max(c.regionEnd, s+n)
			continue
		}
		c.base = max(c.base, c.regionEnd) // drop what the previous region covered
		out = append(out, buf[c.base:s]...)
		out = append(out, Mask...)
		c.base, c.regionEnd = s, s+n
	}
	c.next = max(c.next, limit)
	c.base = max(c.base, c.regionEnd)
	if c.base < limit {
		out = append(out, buf[c.base:limit]...)
		c.base = limit
	}
	return out
}

// longestAt returns the length of the longest form that b starts with, or 0.
func (r *Redactor) longestAt(b []byte, prefix uint64) int {
	for _, f := range r.byPrefix[prefix] {
		if bytes.HasPrefix(b, f) {
			return len(f)
		}
	}
	return 0
}
