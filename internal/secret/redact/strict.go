package redact

import (
	"bytes"
	"encoding/binary"
	"io"
)

// NewStrict builds a [Redactor] for values its reader must not learn even in part: the
// secrets the egress proxy swaps into requests, masked in what a host sends back to a
// sandbox that never held them. Values shorter than [MinLen] are ignored; the values are
// copied.
//
// Besides every form [New] masks, a strict Redactor masks
//
//   - a form broken by white space: base64 wrapped every 76 or 64 characters (LF or CRLF),
//     hex with spaces between the bytes, a value indented across lines; up to 16 bytes of
//     white space between two characters (a longer run ends a match);
//   - a form escaped byte by byte: %XX, \uXXXX, \xXX, octal, &#N; in any mixture (one round);
//   - base64 and hex of the value's base64 (Basic credentials reflected in base64 or hex);
//   - the value in lower or upper case;
//   - any piece of any of these that carries at least [PieceLen] bytes of the value: a prefix
//     (a header cut to 40 characters), a suffix, or a piece from the middle.
//
// It is slower than [New] (see docs/benchmarks-history.md#strict-masking-of-bound-hosts-responses-26-finding-11) and masks more: text that shares a piece
// of PieceLen bytes with a value (another token with the same fixed header, say) is masked
// too.
func NewStrict(values [][]byte) *Redactor {
	return &Redactor{strict: newFragIndex(values)}
}

// strictWriter is the strict matcher over a stream: it normalizes the input into a skeleton
// ([skeleton]), tests each skeleton position for a masked piece and writes the input with
// each masked region replaced by [Mask]. It holds back at most the longest form's length of
// skeleton (each skeleton byte at most one escape and maxGap bytes of white space) and an
// escape that may be incomplete.
type strictWriter struct {
	x     *fragIndex
	w     io.Writer // nil: the output stays in out ([Redactor.Bytes])
	own   bool      // in is the writer's own buffer (it may move bytes within it)
	in    []byte    // input from the first byte neither emitted nor dropped, or before
	k     skeleton  // over in
	next  int       // next skeleton position to test
	regIn int       // end in in of the latest masked region; a match starting before it extends it
	base  int       // first byte of in neither emitted nor dropped
	out   []byte
	err   error
	done  bool
	// scratch holds an escape's text and the skeleton after it (literalStarts).
	scratch []byte
}

func (x *fragIndex) bytes(b []byte) []byte {
	if len(b) > 64<<10 {
		// Streamed in pieces: the skeleton of a piece, not of the whole text, is held (and
		// its offsets stay small).
		out := bytes.NewBuffer(make([]byte, 0, len(b)))
		w := &strictWriter{x: x, w: out, own: true}
		for p := b; len(p) > 0; p = p[min(len(p), 32<<10):] {
			w.Write(p[:min(len(p), 32<<10)])
		}
		w.Close()
		return out.Bytes()
	}
	s := &strictWriter{x: x, in: b, out: make([]byte, 0, len(b))}
	s.step(true)
	return s.out
}

func (s *strictWriter) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	if s.done {
		return 0, ErrClosed
	}
	s.in = append(s.in, p...)
	s.step(false)
	if err := s.flush(); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Close flushes the held-back bytes to the underlying writer; it does not close it.
func (s *strictWriter) Close() error {
	if s.err != nil {
		return s.err
	}
	if s.done {
		return nil
	}
	s.done = true
	s.step(true)
	return s.flush()
}

func (s *strictWriter) flush() error {
	if len(s.out) == 0 {
		return nil
	}
	if _, err := s.w.Write(s.out); err != nil {
		s.err = err
		return err
	}
	s.out = s.out[:0]
	return nil
}

// step normalizes what it can, decides every position a masked piece could start at that
// can be decided now (all of them when final, or at the end of a segment), appends the
// output that is final and drops what is done with.
func (s *strictWriter) step(final bool) {
	for {
		segmentEnd := s.k.read(s.in, final)
		lim := len(s.k.skel)
		if !final && !segmentEnd {
			// A piece starting before lim ends within the skeleton read so far, also one
			// that starts in an escape's text (literalStarts).
			lim = max(s.next, len(s.k.skel)-s.x.maxLen)
		}
		s.decide(lim)
		upTo := s.k.pos
		if lim < len(s.k.skel) {
			upTo = int(s.k.from[lim])
		}
		s.base = max(s.base, s.regIn)
		if s.base < upTo {
			s.out = append(s.out, s.in[s.base:upTo]...)
			s.base = upTo
		}
		s.trim()
		if !segmentEnd {
			return
		}
	}
}

// decide tests the skeleton positions [s.next, lim) as starts of masked pieces, and at an
// escape, the escape's own text too (see literalStarts).
func (s *strictWriter) decide(lim int) {
	x, k := s.x, &s.k
	if x.maxLen == 0 {
		s.next = max(s.next, lim)
		return
	}
	sk := k.skel
	e := 0
	for e < len(k.esc) && int(k.esc[e].skel) < s.next {
		e++
	}
	for i := s.next; i < lim; {
		// Up to the next escape's first byte: the skeleton alone.
		stop, at := lim, -1
		if e < len(k.esc) && int(k.esc[e].skel) < lim {
			at = int(k.esc[e].skel)
			stop = at + 1
		}
		filter, shift := x.filter, x.shift // locals: the loop's calls would make it reload fields
		for end := min(stop, len(sk)-keyLen+1); i < end; i++ {
			key := binary.LittleEndian.Uint32(sk[i:])
			h := (key * hashMul32) >> shift
			if filter[h>>6]&(1<<(h&63)) == 0 {
				continue
			}
			if n := x.longestAt(sk[i:], key); n > 0 {
				s.mark(int(k.from[i]), k.end(i+n-1))
			}
		}
		i = stop
		if at >= 0 {
			s.literalStarts(at, int(k.esc[e].span))
			e++
		}
	}
	s.next = max(s.next, lim)
}

// literalStarts tests the text of the escape that starts at skeleton byte i (span input
// bytes), after its first byte, as the start of a masked piece that goes on in the skeleton
// after the escape. A host may write a value right after "%" or "\u" (the sandbox can put
// those in the header it reflects): the skeleton then decodes the value's first characters
// with the escape ("%ab", "\ucafe") and its matches start only after them, which would
// leave a short value unmasked.
func (s *strictWriter) literalStarts(i, span int) {
	x, k := s.x, &s.k
	from := int(k.from[i])
	lit := s.in[from+1 : from+span]
	next := i + 1
	for next < len(k.from) && int(k.from[next]) == from {
		next++ // the other bytes the escape decoded to
	}
	// The keys first, from the escape's text and the next few skeleton bytes; the whole
	// lookahead is copied only when one passes the filter.
	var head [needEscape + keyLen]byte
	h := copy(head[:], lit)
	h += copy(head[h:], k.skel[next:min(len(k.skel), next+keyLen-1)])
	var buf []byte
	for o := 0; o < len(lit) && o+keyLen <= h; o++ {
		key := binary.LittleEndian.Uint32(head[o:])
		hash := (key * hashMul32) >> x.shift
		if x.filter[hash>>6]&(1<<(hash&63)) == 0 {
			continue
		}
		if buf == nil {
			buf = append(s.scratch[:0], lit...)
			buf = append(buf, k.skel[next:min(len(k.skel), next+x.maxLen)]...)
			s.scratch = buf
		}
		n := x.longestAt(buf[o:], key)
		if n == 0 {
			continue
		}
		start := from + 1 + o
		stop := start + n
		if n > len(lit)-o {
			stop = k.end(next + o + n - len(lit) - 1)
		}
		s.mark(start, stop)
	}
}

// mark masks the input [start, stop): a region that starts inside the latest one (or in the
// escape it ends in) extends it; any other is a new one: the input before it is emitted, then
// one [Mask].
func (s *strictWriter) mark(start, stop int) {
	if start < s.regIn {
		s.regIn = max(s.regIn, stop)
		return
	}
	s.base = max(s.base, s.regIn)
	s.out = append(s.out, s.in[s.base:start]...)
	s.out = append(s.out, Mask...)
	s.base, s.regIn = start, stop
}

// trim drops the decided skeleton and the input no longer needed (before base, and before the
// first skeleton byte left), rebasing every offset.
func (s *strictWriter) trim() {
	k := &s.k
	k.drop(s.next)
	s.next = 0
	// Keep the text of every skeleton byte still to decide: literalStarts reads an escape's.
	cut := s.base
	if len(k.from) > 0 {
		cut = min(cut, int(k.from[0]))
	}
	if cut <= 0 {
		return
	}
	if s.own {
		s.in = s.in[:copy(s.in, s.in[cut:])]
	} else {
		s.in = s.in[cut:]
	}
	for i := range k.from {
		k.from[i] -= int32(cut)
	}
	k.pos -= cut
	s.regIn -= cut
	s.base -= cut
}
