package verify

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"runtime"
	"sync"

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
	case "purged":
		return &b.Purged
	case "purged_runs":
		return &b.PurgedRuns
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
	// prevText and prevHash are the texts of the last proof this scanner read, by position,
	// and their decoded hashes (proofHash).
	prevText [maxProofLen][]byte
	prevHash [maxProofLen][]byte
	// stream is set for a scanner over a window of a file ([streamReader]): the window's bytes
	// move and the slabs are reused for each entry, so prevText and prevHash point into
	// textStore and hashStore, copies that stay.
	stream    bool
	textStore [maxProofLen][46]byte
	hashStore [maxProofLen][HashSize]byte
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
	// A hash (most strings of a bundle) is taken at once: decodeHash accepts only the
	// base64 alphabet, so the text holds no escape, control or non-ASCII byte.
	start := len(s.slab)
	if s.slab == nil || start+HashSize > cap(s.slab) {
		s.slab, start = make([]byte, 0, slabSize), 0
	}
	if s.i+46 <= len(s.b) && s.b[s.i] == '"' && s.b[s.i+45] == '"' && decodeHash(s.slab[start:start+HashSize], s.b[s.i+1:s.i+45]) {
		s.i += 46
		s.slab = s.slab[:start+HashSize]
		return s.slab[start : start+HashSize : start+HashSize], true
	}
	// Any other string (an entry's bytes) is decoded where it stands, in one pass: it ends at
	// the first '"' (an escape's '\\' is not base64, so the decoder refuses it), and it is
	// taken only when it decoded to the length its text gives, which a text holding a newline
	// (the only bytes the decoder skips) never does. Anything else is read as before.
	if b, ok := s.base64InPlace(); ok {
		return b, true
	}
	text, ok := s.plainString()
	if !ok {
		return nil, false
	}
	n := base64.StdEncoding.DecodedLen(len(text))
	if len(s.slab)+n > cap(s.slab) {
		s.slab = make([]byte, 0, max(slabSize, n))
	}
	start = len(s.slab)
	dst := s.slab[start : start+n]
	m, err := strictBase64.Decode(dst, text)
	if err != nil || base64.StdEncoding.EncodedLen(m) != len(text) {
		return nil, false // not canonical (line breaks, padding bits): the strict parser says why
	}
	s.slab = s.slab[:start+m]
	return s.slab[start : start+m : start+m], true
}

// strictBase64 is standard padded base64 that refuses nonzero padding bits: with the length
// checks around it, each byte string has one spelling in a bundle.
var strictBase64 = base64.StdEncoding.Strict()

// base64InPlace decodes the string at s.i when its text, up to the first '"', is padded
// standard base64 of the length it decodes to; see base64.
func (s *scanner) base64InPlace() ([]byte, bool) {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, false
	}
	k := bytes.IndexByte(s.b[s.i+1:], '"')
	if k < 0 || k%4 != 0 {
		return nil, false
	}
	text := s.b[s.i+1 : s.i+1+k]
	n := k / 4 * 3
	if k > 0 && text[k-1] == '=' {
		n--
		if text[k-2] == '=' {
			n--
		}
	}
	if len(s.slab)+n > cap(s.slab) {
		s.slab = make([]byte, 0, max(slabSize, n))
	}
	start := len(s.slab)
	dst := s.slab[start : start+n]
	if m, err := strictBase64.Decode(dst, text); err != nil || m != n {
		return nil, false
	}
	s.i += k + 2
	s.slab = s.slab[:start+n]
	return s.slab[start : start+n : start+n], true
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
	s.ws()
	if s.eat(']') {
		return []Entry{}, true
	}
	if es, ok := s.entriesParallel(); ok {
		return es, true
	}
	es, _, ok := s.entriesUntil(-1)
	return es, ok
}

// entriesUntil reads entries from s.i, the start of one, each followed by ',' or ']'. With
// stop < 0 it reads to the array's ']' and returns done; otherwise it stops, not done, when
// the next entry starts exactly at stop, and fails if none does.
func (s *scanner) entriesUntil(stop int) (es []Entry, done, ok bool) {
	es = []Entry{}
	for {
		e, ok := s.entry()
		if !ok {
			return nil, false, false
		}
		es = append(es, e)
		s.ws()
		if s.eat(']') {
			return es, true, stop < 0
		}
		if !s.eat(',') {
			return nil, false, false
		}
		s.ws()
		switch {
		case stop >= 0 && s.i == stop:
			return es, false, true
		case stop >= 0 && s.i > stop:
			return nil, false, false
		}
	}
}

// parallelScanFrom is the size of the rest of a bundle from which its entries are read by
// every CPU. A variable only so the package's tests can attack the split on bundles of
// hundreds of kilobytes (smallScanSplit), not megabytes: under -race a 7 MB fixture read a
// hundred times cost CI five minutes.
var parallelScanFrom = 4 << 20

// entriesParallel reads the entries from s.i (the first one's start) on every CPU. It guesses
// where entries start, at the first '{' after equal shares of the rest of the document, and
// each part is read from its guess up to the next one's, which it must reach exactly at an
// entry's start: part 0 starts at a true entry, so by induction every guess it accepts is one,
// and the parts joined are what one reader from s.i gives. A wrong guess (in a value after
// the entries, or the array ended) fails and the caller reads the entries in one part.
func (s *scanner) entriesParallel() ([]Entry, bool) {
	parts := runtime.GOMAXPROCS(0)
	rest := len(s.b) - s.i
	if parts < 2 || rest < parallelScanFrom {
		return nil, false
	}
	starts := []int{s.i}
	for j := 1; j < parts; j++ {
		k := bytes.IndexByte(s.b[s.i+rest*j/parts:], '{')
		if k < 0 {
			return nil, false
		}
		at := s.i + rest*j/parts + k
		if at <= starts[len(starts)-1] {
			return nil, false
		}
		starts = append(starts, at)
	}
	type part struct {
		es   []Entry
		end  int
		done bool
		ok   bool
	}
	got := make([]part, parts)
	var wg sync.WaitGroup
	for j := range parts {
		wg.Go(func() {
			w := &scanner{b: s.b, i: starts[j]}
			stop := -1
			if j+1 < parts {
				stop = starts[j+1]
			}
			got[j].es, got[j].done, got[j].ok = w.entriesUntil(stop)
			got[j].end = w.i
		})
	}
	wg.Wait()
	n := 0
	for j, p := range got {
		if !p.ok || p.done != (j == parts-1) {
			return nil, false
		}
		n += len(p.es)
	}
	es := make([]Entry, 0, n)
	for _, p := range got {
		es = append(es, p.es...)
	}
	s.i = got[parts-1].end
	return es, true
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

// proof reads a list of base64 strings; its slice headers go straight into a shared slab,
// moved to a new one when a proof does not fit.
func (s *scanner) proof() ([][]byte, bool) {
	if !s.eat('[') {
		return nil, false
	}
	if s.proofs == nil {
		s.proofs = make([][]byte, 0, slabSize/24)
	}
	start := len(s.proofs)
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
		h, ok := s.proofHash(len(s.proofs) - start)
		if !ok {
			return nil, false
		}
		if len(s.proofs) == cap(s.proofs) {
			fresh := make([][]byte, 0, max(slabSize/24, 2*(len(s.proofs)-start)))
			s.proofs, start = append(fresh, s.proofs[start:]...), 0
		}
		s.proofs = append(s.proofs, h)
	}
	return s.proofs[start:len(s.proofs):len(s.proofs)], true
}

// proofHash reads the k-th hash of a proof. The proofs of consecutive entries of a whole tree
// share every hash above the level where their paths part (about 15 of 17 at 100,000 leaves):
// a string whose 46 bytes, quotes included, are those of the string at the same place of the
// previous proof this scanner read is that hash again, neither decoded nor stored twice. A
// string is decoded by its bytes alone, so the hash is the one base64 would give (decoding
// 1.7 million proof hashes into 54 MB of slabs would be a quarter of verify's CPU).
func (s *scanner) proofHash(k int) ([]byte, bool) {
	whole := s.i+46 <= len(s.b) && s.b[s.i] == '"' && s.b[s.i+45] == '"'
	if whole && k < maxProofLen && s.prevText[k] != nil && bytes.Equal(s.b[s.i:s.i+46], s.prevText[k]) {
		s.i += 46
		return s.prevHash[k], true
	}
	from := s.i
	h, ok := s.base64()
	// Only a hash of HashSize bytes is kept: 46 bytes of text may also be base64 of 31 or 33
	// bytes, which the stream's 32-byte copies (hashStore) would cut or pad, so the text read
	// again (the window cut its entry) would give a hash its bytes do not hold.
	if ok && whole && k < maxProofLen && s.i == from+46 && len(h) == HashSize {
		if s.stream {
			copy(s.textStore[k][:], s.b[from:s.i])
			copy(s.hashStore[k][:], h)
			s.prevText[k], s.prevHash[k] = s.textStore[k][:], s.hashStore[k][:]
		} else {
			s.prevText[k], s.prevHash[k] = s.b[from:s.i], h
		}
	}
	return h, ok
}

// base64Values maps a byte to its value in the standard base64 alphabet, 0xff if none; made
// on first use.
var base64Values = sync.OnceValue(func() *[256]byte {
	var t [256]byte
	for i := range t {
		t[i] = 0xff
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	for i := range len(alphabet) {
		t[alphabet[i]] = byte(i)
	}
	return &t
})

// decodeHash decodes text into dst when it is the canonical padded base64 of 32 bytes (44
// characters, the last one "=", zero padding bits) and reports whether it did; for anything
// else the caller uses the strict decoder (strictBase64), which refuses what is not canonical. Most of a bundle is hashes, and
// the general decoder's setup per call cost more than the decoding.
func decodeHash(dst, text []byte) bool {
	if len(text) != 44 || len(dst) < HashSize || text[43] != '=' {
		return false
	}
	t := base64Values()
	// Fixed-size views: the compiler drops every bounds check of the loop.
	in, out := (*[44]byte)(text), (*[HashSize]byte)(dst)
	var bad byte
	for q := 0; q < 10; q++ {
		a, b, c, d := t[in[4*q]], t[in[4*q+1]], t[in[4*q+2]], t[in[4*q+3]]
		bad |= a | b | c | d
		v := uint32(a)<<18 | uint32(b)<<12 | uint32(c)<<6 | uint32(d)
		out[3*q], out[3*q+1], out[3*q+2] = byte(v>>16), byte(v>>8), byte(v)
	}
	a, b, c := t[in[40]], t[in[41]], t[in[42]]
	bad |= a | b | c
	v := uint32(a)<<18 | uint32(b)<<12 | uint32(c)<<6
	out[30], out[31] = byte(v>>16), byte(v>>8)
	// Any 0xff (not in the alphabet, '=' included) has the high bits set. The last
	// character's two low bits pad: canonical base64 has them zero (one hash, one spelling).
	return bad&0xc0 == 0 && c&0x3 == 0
}
