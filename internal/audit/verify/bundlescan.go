package verify

import (
	"bytes"
	"encoding/base64"
	"encoding/json"

	"github.com/agora-dev/agora/internal/strictjson"
)

// scanBundle reads a bundle in one pass over data, for the shape agora's exporter writes: a
// top-level object whose keys are exactly [Bundle]'s field names, each once, whose entries
// are objects of the four [Entry] keys (each at most once) with a plain decimal index and
// base64 strings with no escapes. Every other value is read with [strictjson.Unmarshal] on
// its own bytes. Anything else (an escape, a null, an unknown or repeated key, a number of
// another form, bad base64, a syntax error) returns ok false, and the caller reads data again
// with [strictjson.Unmarshal] of the whole document, which gives the same answer or the error
// it always gave: the scanner only ever accepts what that reading accepts, with the same
// value (FuzzScanBundle_MatchesStrict holds it to that).
//
// It exists for speed and memory: encoding/json over a 100,000-entry bundle (130 MB) costs
// seconds, and the decoded bytes live in a few large slabs instead of 2 million small ones.
func scanBundle(data []byte) (b *Bundle, ok bool) {
	s := &scanner{b: data}
	b = new(Bundle)
	s.ws()
	if !s.eat('{') {
		return nil, false
	}
	seen := map[string]bool{}
	for first := true; ; first = false {
		s.ws()
		if s.eat('}') {
			break
		}
		if !first {
			if !s.eat(',') {
				return nil, false
			}
			s.ws()
		}
		key, ok := s.plainString()
		if !ok || seen[string(key)] {
			return nil, false
		}
		seen[string(key)] = true
		s.ws()
		if !s.eat(':') {
			return nil, false
		}
		s.ws()
		if string(key) == "entries" {
			if b.Entries, ok = s.entries(); !ok {
				return nil, false
			}
			continue
		}
		target := bundleField(b, string(key))
		if target == nil {
			return nil, false
		}
		raw, ok := s.rawValue()
		if !ok || strictjson.Unmarshal(raw, target) != nil {
			return nil, false
		}
	}
	s.ws()
	if s.i != len(s.b) {
		return nil, false
	}
	return b, true
}

// bundleField returns a pointer to b's field named key in JSON, or nil.
func bundleField(b *Bundle, key string) any {
	switch key {
	case "format":
		return &b.Format
	case "origin":
		return &b.Origin
	case "key":
		return &b.Key
	case "selection":
		return &b.Selection
	case "checkpoint":
		return &b.Checkpoint
	case "anchored":
		return &b.Anchored
	case "manifests":
		return &b.Manifests
	case "selection_note":
		return &b.SelectionNote
	}
	return nil
}

// scanner reads JSON bytes; every method returns false at anything it does not take.
type scanner struct {
	b []byte
	i int
	// slab holds decoded base64 bytes, and proofs the proofs' slice headers, for many
	// entries at a time.
	slab   []byte
	proofs [][]byte
	tmp    [][]byte
}

const slabSize = 1 << 20

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) eat(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// plainString reads a string of printable ASCII with no escapes and returns its contents.
func (s *scanner) plainString() ([]byte, bool) {
	if !s.eat('"') {
		return nil, false
	}
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return s.b[start : s.i-1], true
		case c < 0x20 || c >= 0x7f || c == '\\':
			return nil, false
		}
		s.i++
	}
	return nil, false
}

// rawValue returns the bytes of one JSON value, checked by encoding/json.
func (s *scanner) rawValue() ([]byte, bool) {
	dec := json.NewDecoder(bytes.NewReader(s.b[s.i:]))
	var raw json.RawMessage
	if dec.Decode(&raw) != nil {
		return nil, false
	}
	s.i += int(dec.InputOffset())
	return raw, true
}

// base64 reads a string and decodes it as encoding/json decodes a []byte field.
func (s *scanner) base64() ([]byte, bool) {
	text, ok := s.plainString()
	if !ok {
		return nil, false
	}
	n := base64.StdEncoding.DecodedLen(len(text))
	if s.slab == nil || len(s.slab)+n > cap(s.slab) {
		s.slab = make([]byte, 0, max(slabSize, n))
	}
	start := len(s.slab)
	dst := s.slab[start : start+n]
	m, err := base64.StdEncoding.Decode(dst, text)
	if err != nil {
		return nil, false
	}
	s.slab = s.slab[:start+m]
	return s.slab[start : start+m : start+m], true
}

// uint reads a JSON number that is a plain decimal and fits a uint64.
func (s *scanner) uint() (uint64, bool) {
	start := s.i
	var v uint64
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		d := uint64(s.b[s.i] - '0')
		if v > (1<<64-1-d)/10 {
			return 0, false
		}
		v = v*10 + d
		s.i++
	}
	n := s.i - start
	if n == 0 || (n > 1 && s.b[start] == '0') {
		return 0, false
	}
	// A fraction or an exponent is a number of another form.
	if s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		return 0, false
	}
	return v, true
}

func (s *scanner) entries() ([]Entry, bool) {
	if !s.eat('[') {
		return nil, false
	}
	es := []Entry{}
	for first := true; ; first = false {
		s.ws()
		if s.eat(']') {
			return es, true
		}
		if !first {
			if !s.eat(',') {
				return nil, false
			}
			s.ws()
		}
		e, ok := s.entry()
		if !ok {
			return nil, false
		}
		es = append(es, e)
	}
}

// entry reads one entry object: the keys index, entry, leaf_hash and inclusion_proof, each
// at most once, in any order.
func (s *scanner) entry() (e Entry, ok bool) {
	if !s.eat('{') {
		return e, false
	}
	var seen [4]bool
	for first := true; ; first = false {
		s.ws()
		if s.eat('}') {
			return e, true
		}
		if !first {
			if !s.eat(',') {
				return e, false
			}
			s.ws()
		}
		key, ok := s.plainString()
		if !ok {
			return e, false
		}
		s.ws()
		if !s.eat(':') {
			return e, false
		}
		s.ws()
		var k int
		switch string(key) {
		case "index":
			k = 0
			e.Index, ok = s.uint()
		case "entry":
			k = 1
			e.Entry, ok = s.base64()
		case "leaf_hash":
			k = 2
			e.LeafHash, ok = s.base64()
		case "inclusion_proof":
			k = 3
			e.InclusionProof, ok = s.proof()
		default:
			return e, false
		}
		if !ok || seen[k] {
			return e, false
		}
		seen[k] = true
	}
}

// proof reads a list of base64 strings; its slice headers go into a shared slab.
func (s *scanner) proof() ([][]byte, bool) {
	if !s.eat('[') {
		return nil, false
	}
	s.tmp = s.tmp[:0]
	for first := true; ; first = false {
		s.ws()
		if s.eat(']') {
			break
		}
		if !first {
			if !s.eat(',') {
				return nil, false
			}
			s.ws()
		}
		h, ok := s.base64()
		if !ok {
			return nil, false
		}
		s.tmp = append(s.tmp, h)
	}
	n := len(s.tmp)
	if s.proofs == nil || len(s.proofs)+n > cap(s.proofs) {
		s.proofs = make([][]byte, 0, max(slabSize/24, n))
	}
	start := len(s.proofs)
	s.proofs = append(s.proofs, s.tmp...)
	return s.proofs[start : start+n : start+n], true
}
