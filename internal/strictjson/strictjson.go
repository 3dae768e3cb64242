// Package strictjson reads JSON that must have exactly one meaning: documents the worker,
// the host and the runtimes exchange across the sandbox boundary (manifest.json, result.json,
// the secrets object, Claude Code's stream-json events) and the audit bundles `agora verify`
// reads. encoding/json alone silently replaces invalid UTF-8, keeps the last of two duplicate
// keys, and matches object keys to struct fields case-insensitively, so "state" and "State" in
// one object would let a writer say two things, and a lone "State" would be read as "state"
// by Go while every case-sensitive reader (jq, Python, JavaScript) sees no "state" at all.
//
// A lone UTF-16 surrogate escape (\ud800 without its pair) reads as U+FFFD, as encoding/json
// reads it: refusing it would fail an agent CLI's event whose text JavaScript cut mid-pair. In
// keys, distinct lone surrogates therefore read alike, and two such keys are refused as equal
// (TestLoneSurrogates_KeysRefusedValuesReplaced).
//
// It is pure (no I/O, no agora imports) and runs on both sides of the sandbox.
package strictjson

import (
	"bytes"
	"encoding"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// MaxDepth bounds the nesting of a document.
const MaxDepth = 64

// maxKeyInError caps how much of an object key an error repeats: keys are untrusted.
const maxKeyInError = 80

// Check makes sure b is one JSON document with one reading: valid UTF-8, no two keys of an
// object equal under case folding, no number beyond float64's range, at most MaxDepth levels
// deep, nothing after it.
func Check(b []byte) error {
	_, err := check(b, nil)
	return err
}

// CheckObject is [Check] for a document that must be a JSON object.
func CheckObject(b []byte) error {
	first, err := check(b, nil)
	if err != nil {
		return err
	}
	if first != '{' {
		return errors.New("not a JSON object")
	}
	return nil
}

// Unmarshal parses b into v (a non-nil pointer) so that every reader sees what Go sees: b
// must pass [Check], and every key of an object that v's type reads into a struct must be
// exactly the name of one of its fields (json tag or Go name, as encoding/json has it): a key
// that matches a field only under case folding ("State" for "state") is refused like an
// unknown one, at every level. Values read into maps, interfaces or types with their own
// UnmarshalJSON or UnmarshalText keep their keys as written and are only [Check]ed.
func Unmarshal(b []byte, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("strictjson: Unmarshal needs a non-nil pointer, not %T", v)
	}
	if _, err := check(b, shapeOf(rv.Type().Elem())); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// UnmarshalKnown is [Unmarshal] for documents that carry more than v reads (a protocol's
// events, which gain fields over time): a key no struct of v's type names, not even under
// case folding, is allowed and ignored. Everything else holds as for Unmarshal: b passes
// [Check] (so no two keys of any object are equal under case folding, known or not), and a
// key that matches a field only under case folding ("Cmd" for "cmd") is refused, at every
// level, so every case-sensitive reader of b sees exactly the values v gets.
func UnmarshalKnown(b []byte, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("strictjson: UnmarshalKnown needs a non-nil pointer, not %T", v)
	}
	if _, err := checkWith(b, shapeOf(rv.Type().Elem()), true); err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// Member is one member of a JSON object: its key, unescaped, and its value exactly as written
// (a slice of the document, without the whitespace around it).
type Member struct {
	Key   string
	Value []byte
}

// Fields are the JSON field names of a flat struct, for [Fields.Members]; build them once.
type Fields struct{ s *shape }

// NewFields returns the exact (case-sensitive) field names names.
func NewFields(names ...string) *Fields {
	s := &shape{fields: make(map[string]*shape, len(names)), folded: make(map[string]string, len(names))}
	for _, n := range names {
		s.fields[n] = nil
		s.folded[foldKey(n)] = n
	}
	return &Fields{s: s}
}

// Members checks b exactly as [UnmarshalKnown] checks a document read into a struct with f's
// field names, each of a type that reads itself (json.RawMessage): b passes [Check] and is an
// object, and no key of it equals one of the names only under case folding (a key no name
// matches, even folded, is allowed). It appends b's members, in document order, to dst. It is
// one pass over b where UnmarshalKnown is two (the check, then encoding/json's decode), and it
// keeps the members a caller reads by a name known only at run time (a configured claim).
func (f *Fields) Members(b []byte, dst []Member) ([]Member, error) {
	first, members, err := walkWith(b, f.s, true, true, dst)
	if err != nil {
		return dst, err
	}
	if first != '{' {
		return dst, errors.New("not a JSON object")
	}
	return members, nil
}

// Decode is [Unmarshal] of at most limit bytes; what names the document in errors
// ("read manifest: ...").
func Decode(what string, b []byte, limit int, v any) error {
	if len(b) > limit {
		return fmt.Errorf("read %s: %d bytes, over the %d byte limit", what, len(b), limit)
	}
	if err := Unmarshal(b, v); err != nil {
		return fmt.Errorf("read %s: %w", what, err)
	}
	return nil
}

// check returns the document's first delimiter ('{', '[') or 0 for a scalar. want, when not
// nil, is the shape of the Go value it will be decoded into.
func check(b []byte, want *shape) (json.Delim, error) { return checkWith(b, want, false) }

// checkWith is check; with open, a key no field of want's structs names (not even under case
// folding) is allowed, and its value read with no shape.
func checkWith(b []byte, want *shape, open bool) (json.Delim, error) {
	first, _, err := walkWith(b, want, open, false, nil)
	return first, err
}

// walkWith is checkWith; with collect, the walk also appends the members of the top-level
// object to members and returns them.
func walkWith(b []byte, want *shape, open, collect bool, members []Member) (json.Delim, []Member, error) {
	if !utf8.Valid(b) {
		return 0, nil, errors.New("not valid UTF-8")
	}
	// The walk checks the syntax as it goes (it used to follow json.Valid, a second pass);
	// encoding/json is asked only once the walk has refused b, so a document with a syntax
	// error is refused with encoding/json's reason, as before, whatever else is wrong in it.
	w := walker{b: b, open: open}
	var first json.Delim
	var err error
	if w.space(); collect && w.i < len(w.b) && w.b[w.i] == '{' {
		w.i++
		// The members go through object's results, not the walker: an append through a
		// pointer would move the caller's array for them to the heap.
		first = '{'
		members, err = w.object(0, want, true, members)
	} else {
		first, err = w.value(0, want)
		members = nil
	}
	if err == nil {
		if w.space(); w.i != len(w.b) {
			err = errSyntax
		}
	}
	if err == nil {
		return first, members, nil
	}
	if !json.Valid(b) {
		// Say why, as encoding/json would.
		dec := json.NewDecoder(bytes.NewReader(b))
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return 0, nil, err
		}
		return 0, nil, errors.New("data after the JSON document")
	}
	if errors.Is(err, errSyntax) {
		// Never expected (FuzzWalk_SyntaxMatchesJSONValid): refused all the same.
		return 0, nil, errors.New("not valid JSON (strictjson and encoding/json disagree)")
	}
	return 0, nil, err
}

// errSyntax is the walk's refusal of b's syntax; walkWith replaces it with encoding/json's
// reason.
var errSyntax = errors.New("JSON syntax error")

// walker reads one JSON document: its syntax (RFC 8259's grammar, exactly what json.Valid
// accepts: FuzzWalk_SyntaxMatchesJSONValid), its keys, nesting and numbers. A syntax error is
// errSyntax, whose reason walkWith asks encoding/json for. It reads bytes rather than
// json.Decoder tokens, which cost an allocation and a formatted error each and made reading an
// audit bundle twice as slow.
type walker struct {
	b    []byte
	i    int
	open bool // unknown keys are allowed (UnmarshalKnown); near misses never are
}

func (w *walker) space() {
	for w.i < len(w.b) {
		switch w.b[w.i] {
		case ' ', '\t', '\n', '\r':
			w.i++
		default:
			return
		}
	}
}

// value reads one value at nesting depth and returns its opening delimiter, if any. want is
// the shape of the Go value it is decoded into; nil means any (no field names to check).
func (w *walker) value(depth int, want *shape) (json.Delim, error) {
	w.space()
	if w.i >= len(w.b) {
		return 0, errSyntax
	}
	switch c := w.b[w.i]; c {
	case '{', '[':
		if c == '[' && want != nil && want.bytes {
			// encoding/json reads [65,66] into a []byte too: a second spelling of "QUI=".
			return 0, errors.New("a byte string is written as a list: it must be a base64 string")
		}
		if depth >= MaxDepth {
			return 0, fmt.Errorf("nested deeper than %d levels", MaxDepth)
		}
		w.i++
		var err error
		if c == '{' {
			_, err = w.object(depth, want, false, nil)
		} else {
			err = w.array(depth, want)
		}
		return json.Delim(c), err
	case '"':
		start := w.i
		escaped, ok := w.skipString()
		if !ok {
			return 0, errSyntax
		}
		if want != nil && want.bytes {
			return 0, canonicalBytes(w.b[start+1:w.i-1], escaped)
		}
	case 't':
		return 0, w.literal("true")
	case 'f':
		return 0, w.literal("false")
	case 'n':
		return 0, w.literal("null")
	default:
		start := w.i
		if !w.number() {
			return 0, errSyntax
		}
		return 0, checkNumber(json.Number(w.b[start:w.i]))
	}
	return 0, nil
}

// canonicalBytes checks the text of a string decoded into a []byte: encoding/json reads any
// base64 it can (line breaks, nonzero padding bits, "\/" for "/"), so one value has many
// spellings and a signed document's bytes could change under an unchanged meaning. Only
// padded standard base64 in its one form, written without escapes, is taken.
func canonicalBytes(text []byte, escaped bool) error {
	if escaped {
		return errors.New("a byte string (base64) is written with a JSON escape")
	}
	b, err := base64.StdEncoding.Strict().DecodeString(string(text))
	if err != nil || base64.StdEncoding.EncodedLen(len(b)) != len(text) {
		return errors.New("a byte string is not canonical base64 (standard alphabet, padded, no line breaks, zero padding bits)")
	}
	return nil
}

// literal moves past lit (true, false, null) at w.i.
func (w *walker) literal(lit string) error {
	if len(w.b)-w.i < len(lit) || string(w.b[w.i:w.i+len(lit)]) != lit {
		return errSyntax
	}
	w.i += len(lit)
	return nil
}

// number moves past the number at w.i and reports whether it is one by JSON's grammar:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (w *walker) number() bool {
	if w.at('-') {
		w.i++
	}
	switch {
	case w.at('0'):
		w.i++
	case w.i < len(w.b) && '1' <= w.b[w.i] && w.b[w.i] <= '9':
		w.digits()
	default:
		return false
	}
	if w.at('.') {
		w.i++
		if w.digits() == 0 {
			return false
		}
	}
	if w.at('e') || w.at('E') {
		w.i++
		if w.at('+') || w.at('-') {
			w.i++
		}
		if w.digits() == 0 {
			return false
		}
	}
	return true
}

// digits moves past the digits at w.i and returns how many there were.
func (w *walker) digits() int {
	start := w.i
	for w.i < len(w.b) && '0' <= w.b[w.i] && w.b[w.i] <= '9' {
		w.i++
	}
	return w.i - start
}

// at reports whether the byte at w.i is c.
func (w *walker) at(c byte) bool { return w.i < len(w.b) && w.b[w.i] == c }

// object reads the members of an object whose '{' was just read, and its '}'. With collect,
// it appends them to members and returns them.
func (w *walker) object(depth int, want *shape, collect bool, members []Member) ([]Member, error) {
	var keys keySet
	for n := 0; ; n++ {
		w.space()
		if n == 0 && w.at('}') {
			w.i++
			return members, nil
		}
		if n > 0 {
			// After a member: '}' ends the object, ',' comes before the next member.
			if w.at('}') {
				w.i++
				return members, nil
			}
			if !w.at(',') {
				return members, errSyntax
			}
			w.i++
			w.space()
		}
		if !w.at('"') {
			return members, errSyntax
		}
		k, err := w.str()
		if err != nil {
			return members, err
		}
		if !keys.add(k) {
			return members, fmt.Errorf("duplicate key %q", clip(k))
		}
		var next *shape
		if want != nil {
			if f, known := want.fields[k]; w.open && want.fields != nil && !known && !want.nearMiss(k) {
				next = nil // a key no field names, allowed open: no error is built for it
			} else if known {
				next = f
			} else if next, err = want.field(k); err != nil {
				return members, err
			}
		}
		if w.space(); !w.at(':') {
			return members, errSyntax
		}
		w.i++
		w.space()
		start := w.i
		if _, err := w.value(depth+1, next); err != nil {
			return members, atPath("."+clip(k), err)
		}
		if collect {
			members = append(members, Member{Key: k, Value: w.b[start:w.i]})
		}
	}
}

// array reads the elements of an array whose '[' was just read, and its ']'.
func (w *walker) array(depth int, want *shape) error {
	var elem *shape
	if want != nil {
		elem = want.elem
	}
	for n := 0; ; n++ {
		w.space()
		if n == 0 && w.at(']') {
			w.i++
			return nil
		}
		if n > 0 {
			// After an element: ']' ends the array, ',' comes before the next element.
			if w.at(']') {
				w.i++
				return nil
			}
			if !w.at(',') {
				return errSyntax
			}
			w.i++
		}
		if _, err := w.value(depth+1, elem); err != nil {
			return atPath("["+strconv.Itoa(n)+"]", err)
		}
	}
}

// skipString moves past the string at w.i (its opening quote) and reports whether it holds an
// escape and whether it is a string by JSON's grammar: closed, no control character, every
// escape one of \" \\ \/ \b \f \n \r \t \uXXXX. (b is valid UTF-8, checked first.)
func (w *walker) skipString() (escaped, ok bool) {
	for w.i++; w.i < len(w.b); w.i++ {
		switch c := w.b[w.i]; {
		case c == '"':
			w.i++
			return escaped, true
		case c < 0x20:
			return escaped, false
		case c == '\\':
			escaped = true
			w.i++
			if w.i >= len(w.b) {
				return escaped, false
			}
			switch w.b[w.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				for range 4 {
					if w.i++; w.i >= len(w.b) || !isHex(w.b[w.i]) {
						return escaped, false
					}
				}
			default:
				return escaped, false
			}
		}
	}
	return escaped, false
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

// str reads a string at w.i and returns its value. One without escapes is its bytes; one with
// escapes is unquoted by encoding/json itself, so a key means here what it means there.
func (w *walker) str() (string, error) {
	start := w.i
	escaped, ok := w.skipString()
	if !ok {
		return "", errSyntax
	}
	raw := w.b[start:w.i]
	if !escaped {
		return string(raw[1 : len(raw)-1]), nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", err
	}
	return s, nil
}

// keySet holds the keys of one object, to find two equal under case folding. Most objects have
// a handful of keys, so it scans an array (on the walker's stack) before it needs a map. The
// array holds an ASCII key as it is (compared with asciiEqualFold: no folded copy to allocate
// per key) and any other key folded (foldRunes); the map holds every key folded.
type keySet struct {
	few  [16]string
	n    int // keys in few
	many map[string]bool
}

// add records k and reports whether no key equal to it under case folding was there.
func (s *keySet) add(k string) bool {
	if s.many != nil {
		f := foldKey(k)
		if s.many[f] {
			return false
		}
		s.many[f] = true
		return true
	}
	e := k
	if !isASCII(k) {
		e = foldRunes(k)
	}
	for _, x := range s.few[:s.n] {
		if asciiEqualFold(x, e) {
			return false
		}
	}
	if s.n < len(s.few) {
		s.few[s.n] = e
		s.n++
		return true
	}
	s.many = make(map[string]bool, 2*len(s.few))
	for _, x := range s.few {
		s.many[foldKey(x)] = true
	}
	s.many[foldKey(e)] = true
	return true
}

// asciiEqualFold reports whether a and b are equal with ASCII letters compared regardless of
// case and every other byte exactly. For two entries of a keySet (an ASCII key as it is, any
// other key folded, whose ASCII letters are then upper case) that is foldKey(a) == foldKey(b).
func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if x == y {
			continue
		}
		if 'a' <= x && x <= 'z' {
			x -= 'a' - 'A'
		}
		if 'a' <= y && y <= 'z' {
			y -= 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// foldedField reports whether foldKey(k) is a folded field name of a struct shape, without
// allocating the folded key when k is short ASCII (the common key).
func (s *shape) foldedField(k string) bool {
	var buf [64]byte
	if len(k) > len(buf) || !isASCII(k) {
		_, ok := s.folded[foldKey(k)]
		return ok
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		buf[i] = c
	}
	_, ok := s.folded[string(buf[:len(k)])]
	return ok
}

// pathError is an error found inside a document, with where: the object keys and array
// indexes from the top (".dispatches.entries[3]"). It is built only on the way out of a
// failed walk, so a document that passes costs no paths.
type pathError struct {
	path string
	err  error
}

func (e *pathError) Error() string { return e.err.Error() + " at " + e.path }

func (e *pathError) Unwrap() error { return e.err }

// atPath puts seg in front of the path of err.
func atPath(seg string, err error) error {
	if pe, ok := err.(*pathError); ok {
		return &pathError{path: seg + pe.path, err: pe.err}
	}
	return &pathError{path: seg, err: err}
}

// maxNumberDigits bounds the digits before a number's exponent. strconv.ParseFloat, which
// encoding/json reads numbers with, keeps only 800 digits where it cannot round fast (and then
// loses the place of the decimal point of a longer integer part), and stops reading an
// exponent's digits at 10000, which a mantissa of more than about 9000 leading zeros undoes:
// past 800 digits Go can read another value than every exact reader does
// (9007199254740993{790 zeros}1e-791 is 9.0e8 in Go and 9.0e15 exactly; 0.{10400 zeros}1e100000
// is 0 in Go and +Inf exactly). Up to it, ParseFloat is exact (FuzzRedTeam42JSON_NumberReadExactly),
// and no encoder writes a float64 in more than 767 significant digits.
const maxNumberDigits = 800

// checkNumber refuses a number no float64 holds: readers disagree on what it means (one
// rounds to infinity, one refuses, one keeps it exact), so it has no one reading; and one of
// more than maxNumberDigits digits, which Go may read as another number than it is.
func checkNumber(n json.Number) error {
	if len(n) > maxNumberDigits && mantissaDigits(string(n)) > maxNumberDigits {
		return fmt.Errorf("number %s... has more than %d digits before its exponent: readers disagree on its value", n[:24], maxNumberDigits)
	}
	if _, err := strconv.ParseFloat(string(n), 64); err != nil {
		s := string(n)
		if len(s) > 24 {
			s = s[:24] + "..."
		}
		return fmt.Errorf("number %s is out of range", s)
	}
	return nil
}

// mantissaDigits counts the digits of the JSON number n before its exponent.
func mantissaDigits(n string) int {
	d := 0
	for i := 0; i < len(n); i++ {
		switch c := n[i]; {
		case c == 'e' || c == 'E':
			return d
		case '0' <= c && c <= '9':
			d++
		}
	}
	return d
}

// foldKey maps every rune of k to the smallest member of its simple case-folding orbit, so
// keys encoding/json would match to the same field ("Type", "TYPE", "\u212Aind" and "kind")
// map to the same string.
func foldKey(k string) string {
	lower := false
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c >= utf8.RuneSelf {
			return foldRunes(k)
		}
		lower = lower || 'a' <= c && c <= 'z'
	}
	if !lower { // the orbit of an ASCII letter has its upper case as its smallest member
		return k
	}
	b := []byte(k)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// foldRunes is foldKey for any UTF-8.
func foldRunes(k string) string {
	var b strings.Builder
	b.Grow(len(k))
	for _, r := range k {
		m := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			m = min(m, f)
		}
		b.WriteRune(m)
	}
	return b.String()
}

func clip(k string) string {
	if len(k) <= maxKeyInError {
		return k
	}
	i := maxKeyInError
	for i > 0 && !utf8.RuneStart(k[i]) {
		i--
	}
	return k[:i] + "..."
}

// shape is what a Go type makes of a JSON value: the exact field names of a struct (with the
// shape of each), the shape of the elements of a slice, array or map, or nothing to check
// (nil) for scalars, interfaces and types that decode themselves.
type shape struct {
	fields map[string]*shape // a struct: exact field name -> its shape; nil otherwise
	folded map[string]string // a struct: foldKey(name) -> name, to explain a refused key
	elem   *shape            // a slice, array or map: the elements' shape
	bytes  bool              // a []byte: its string must be canonical base64 (canonicalBytes)
}

// field returns the shape of field k of a struct shape, or an error if k is not exactly one
// of its names. A shape that is not a struct's accepts any key.
func (s *shape) field(k string) (*shape, error) {
	if s.fields == nil {
		return s.elem, nil
	}
	if f, ok := s.fields[k]; ok {
		return f, nil
	}
	if name, ok := s.folded[foldKey(k)]; ok {
		return nil, fmt.Errorf("unknown field %q (keys are case-sensitive: the field is %q)", clip(k), name)
	}
	return nil, fmt.Errorf("unknown field %q", clip(k))
}

// nearMiss reports whether k is not a field name of a struct shape but equals one under case
// folding: encoding/json would read it into that field, a case-sensitive reader would not.
func (s *shape) nearMiss(k string) bool {
	if s.fields == nil {
		return false
	}
	_, exact := s.fields[k]
	return !exact && s.foldedField(k)
}

var (
	shapes          sync.Map // reflect.Type -> *shape
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// shapeOf returns the shape of t, built once per type. Shapes are shared only when complete:
// two goroutines may build one type's shape at once, and either result is right.
func shapeOf(t reflect.Type) *shape {
	if s, ok := shapes.Load(t); ok {
		return s.(*shape)
	}
	building := map[reflect.Type]*shape{}
	s := buildShape(t, building)
	for bt, bs := range building {
		shapes.Store(bt, bs)
	}
	return s
}

// buildShape builds t's shape; building holds the shapes built so far, so a type that
// contains itself (through a pointer or slice) reuses its own.
func buildShape(t reflect.Type, building map[reflect.Type]*shape) *shape {
	if s, ok := shapes.Load(t); ok {
		return s.(*shape)
	}
	if s, ok := building[t]; ok {
		return s
	}
	if t.Implements(jsonUnmarshaler) || t.Implements(textUnmarshaler) ||
		t.Kind() != reflect.Pointer && (reflect.PointerTo(t).Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler)) {
		return nil
	}
	var s *shape
	switch t.Kind() {
	case reflect.Pointer:
		s = buildShape(t.Elem(), building)
	case reflect.Slice, reflect.Array, reflect.Map:
		s = &shape{bytes: t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8}
		building[t] = s
		s.elem = buildShape(t.Elem(), building)
	case reflect.Struct:
		s = &shape{fields: map[string]*shape{}, folded: map[string]string{}}
		building[t] = s
		for name, ft := range structFields(t) {
			s.fields[name] = buildShape(ft, building)
			s.folded[foldKey(name)] = name
		}
	default:
		return nil
	}
	return s
}

// structFields returns the JSON names of t's fields and their types, by encoding/json's
// rules: exported fields, or embedded structs; the json tag's name, else the Go name; "-"
// skipped; an untagged embedded struct's fields promoted; of several fields with one name the
// shallowest wins, a tagged one among equals, and none when that leaves a tie.
func structFields(t reflect.Type) map[string]reflect.Type {
	type candidate struct {
		typ    reflect.Type
		tagged bool
	}
	out := map[string]reflect.Type{}
	decided := map[string]bool{}
	visited := map[reflect.Type]bool{}
	level := []reflect.Type{t}
	for len(level) > 0 {
		var next []reflect.Type
		found := map[string][]candidate{}
		for _, st := range level {
			if visited[st] {
				continue
			}
			visited[st] = true
			for i := range st.NumField() {
				sf := st.Field(i)
				ft := sf.Type
				if sf.Anonymous && ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if sf.Anonymous && !sf.IsExported() && ft.Kind() != reflect.Struct || !sf.Anonymous && !sf.IsExported() {
					continue
				}
				tag := sf.Tag.Get("json")
				if tag == "-" {
					continue
				}
				name, _, _ := strings.Cut(tag, ",")
				if name == "" && sf.Anonymous && ft.Kind() == reflect.Struct {
					next = append(next, ft)
					continue
				}
				tagged := name != ""
				if !tagged {
					name = sf.Name
				}
				found[name] = append(found[name], candidate{typ: sf.Type, tagged: tagged})
			}
		}
		for name, cs := range found {
			if decided[name] {
				continue
			}
			decided[name] = true
			var tagged []candidate
			for _, c := range cs {
				if c.tagged {
					tagged = append(tagged, c)
				}
			}
			switch {
			case len(cs) == 1:
				out[name] = cs[0].typ
			case len(tagged) == 1:
				out[name] = tagged[0].typ
			}
		}
		level = next
	}
	return out
}
