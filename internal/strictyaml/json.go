package strictyaml

import (
	"reflect"
	"strconv"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v3"
)

// The JSON fast path. A document whose first non-blank byte is '{' is read in one pass over
// its bytes straight into the target, without yaml.v3's node tree: for a 100,000-task plan in
// JSON (12 MB) that tree and the positions of every path held several hundred megabytes.
//
// It reads only the JSON that YAML reads the same way, and gives up on anything else (a tab
// or a lone carriage return outside the root object, an escape YAML lacks such as \/, a
// surrogate \u escape, a number yaml.v3 resolves to another type or cannot hold, a character
// YAML refuses or takes as a line break, invalid UTF-8, a key longer than YAML's simple-key
// limit or apart from its colon, nesting past maxDepth, trailing bytes); Decode then reads
// the document through yaml.v3 as it always did. Scalars become the yaml.Node yaml.v3 would
// build and go through [Decoder.Decode], so every type conversion and its message is the
// YAML path's own; mappings and lists are walked here the way Decode walks them, and a value
// whose target reads nodes itself ([Unmarshaler], a text type, a type mismatch) gets its node
// subtree. FuzzDecodeJSON_MatchesYAML holds the two paths to the same value, errors and
// positions.

// maxKeyBytes keeps a key within yaml.v3's limit on a simple key (1024 characters from the
// key to its colon); a longer one is read through yaml.v3.
const maxKeyBytes = 1000

var anyType = reflect.TypeFor[any]()

// decodeJSON decodes src into out by the fast path; ok false: the YAML path decodes it. It
// runs only for a zero target, since giving up half way would leave a partly written one.
// A first pass records no positions and stops at the first error; a document with an
// error is decoded again with them, as the YAML path would.
func decodeJSON(file string, src []byte, out any) (pos *Positions, err error, ok bool) {
	if !startsJSON(src) {
		return nil, nil, false
	}
	rv := reflect.ValueOf(out)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || !rv.Elem().IsZero() {
		return nil, nil, false
	}
	t := rv.Elem().Type()
	fresh := reflect.New(t).Elem()
	d := &Decoder{pos: &Positions{file: file}, nomark: true}
	done := d.decodeJSON(src, fresh)
	switch {
	case done && len(d.errs) == 0:
		rv.Elem().Set(fresh)
		d.pos.typ, d.pos.src = t, src
		return d.pos, nil, true
	case len(d.errs) == 0: // bytes it does not take
		return nil, nil, false
	}
	fresh = reflect.New(t).Elem()
	d = newDecoder(file)
	if !d.decodeJSON(src, fresh) {
		return nil, nil, false
	}
	rv.Elem().Set(fresh)
	if len(d.errs) > 0 {
		return d.pos, d.errs, true
	}
	return d.pos, nil, true
}

// positions decodes src again into a throwaway value of type t to record the line of every
// path. src is the caller's, unchanged since (Decode's contract); should the fast path not
// take it now, the YAML path records them.
func positions(file string, src []byte, t reflect.Type) map[string]int {
	d := newDecoder(file)
	if d.decodeJSON(src, reflect.New(t).Elem()) {
		return d.pos.lines
	}
	d = newDecoder(file)
	_ = d.decodeYAML(src, reflect.New(t).Elem())
	return d.pos.lines
}

// startsJSON reports whether the first byte of src past spaces and line feeds is '{'.
func startsJSON(src []byte) bool {
	for _, c := range src {
		switch c {
		case ' ', '\n', '\r':
			continue
		case '{':
			return true
		}
		return false
	}
	return false
}

// decodeJSON decodes the document src into v; false: the fast path gives up.
func (d *Decoder) decodeJSON(src []byte, v reflect.Value) bool {
	s := &jsonScanner{b: src, line: 1}
	s.ws()
	if s.peek() != '{' {
		return false
	}
	d.mark("", s.line)
	if !d.jsonValue(s, v, "") {
		return false
	}
	s.ws()
	return !s.bad && s.i == len(s.b)
}

// jsonValue decodes the value at s into v as [Decoder.Decode] decodes its node; false: give
// up.
func (d *Decoder) jsonValue(s *jsonScanner, v reflect.Value, path string) bool {
	c := s.peek()
	if c != '{' && c != '[' {
		n := &d.scratch
		if readsNode(v.Type()) {
			n = new(yaml.Node)
		}
		ok := s.scalarInto(n)
		if !ok {
			return false
		}
		d.Decode(n, v, path)
		return !d.givenUp()
	}
	if d.stopped {
		return !d.nomark && s.skip()
	}
	if !walked(v, c) {
		n, ok := s.node()
		if !ok {
			return false
		}
		d.Decode(n, v, path)
		return !d.givenUp()
	}
	// Decode's prologue; a collection never carries an anchor in JSON.
	d.mark(path, s.line)
	if d.depth >= maxDepth {
		return false
	}
	d.depth++
	defer func() { d.depth-- }()
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		return d.jsonValue(s, v.Elem(), path)
	case reflect.Struct:
		return d.jsonStruct(s, v, path)
	case reflect.Map:
		return d.jsonMap(s, v, path)
	case reflect.Slice:
		return d.jsonSlice(s, v, path)
	}
	val, ok, good := d.jsonPlain(s, &anyPath{base: path}, d.depth)
	if good && ok && val != nil {
		v.Set(reflect.ValueOf(val))
	}
	return good
}

// join is the path of key under path; "" in the first pass, where a path would only name an
// error, and an error makes that pass give up: a 100,000-task plan has a million of them.
func (d *Decoder) join(path, key string) string {
	if d.nomark {
		return ""
	}
	return join(path, key)
}

// readsNode reports whether a value of type t (or what it points to) is an [Unmarshaler],
// which is handed the node and may keep it; any other scalar is decoded from the Decoder's
// one scratch node, since a node for each of a million scalars is most of what the fast path
// would allocate.
func readsNode(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return reflect.PointerTo(t).Implements(unmarshalerType)
}

// givenUp reports whether the first pass met an error, and so gives up.
func (d *Decoder) givenUp() bool { return d.nomark && d.stopped }

// walked reports whether a mapping or list (c is '{' or '[') for v is walked here rather
// than handed to Decode as a node: the cases Decode decodes field by field or item by item.
// The tests follow Decode's order.
func walked(v reflect.Value, c byte) bool {
	if v.CanAddr() && v.Addr().Type().Implements(unmarshalerType) {
		return false
	}
	switch v.Kind() {
	case reflect.Pointer:
		return true
	case reflect.Struct:
		if c == '{' && hasExportedField(v.Type()) {
			return true
		}
	}
	if v.CanAddr() && v.Addr().Type().Implements(textType) {
		return false
	}
	switch v.Kind() {
	case reflect.Map:
		return c == '{' && v.Type().Key().Kind() == reflect.String
	case reflect.Slice:
		return c == '['
	case reflect.Interface:
		return v.Type() == anyType
	}
	return false
}

// jsonStruct is [Decoder.structure] over the bytes.
// testOnlySeen, set only by the package's tests, hears the length of a mapping's list of keys
// seen each time it grows.
var testOnlySeen func(n int)

func (d *Decoder) jsonStruct(s *jsonScanner, v reflect.Value, path string) bool {
	fields := cachedFields(v.Type())
	// The keys seen, with their lines: never more than the fields and maxErrors unknown
	// ones, since past maxErrors none is added, so a list is enough.
	type seenKey struct {
		key  string
		line int
	}
	var buf [16]seenKey
	seen := buf[:0]
	return s.object(func(key string, line, _ int) bool {
		sub := d.join(path, key)
		// Past maxErrors, keys are still marked and values skipped, as Decode does; a repeated
		// key's mark would change nothing, so the list is not searched or grown: a mapping of
		// two million unknown keys made it quadratic.
		if d.stopped {
			d.mark(sub, line)
			return !d.givenUp() && s.skip()
		}
		for _, k := range seen {
			if k.key == key {
				d.add(line, sub, "duplicate key (first at line %d)", k.line)
				return !d.givenUp() && s.skip()
			}
		}
		seen = append(seen, seenKey{key, line})
		if testOnlySeen != nil {
			testOnlySeen(len(seen))
		}
		d.mark(sub, line)
		f, ok := fields[key]
		if !ok {
			d.add(line, sub, "unknown field %q; known fields: %s", key, knownFields(fields))
			return !d.givenUp() && s.skip()
		}
		return d.jsonValue(s, v.FieldByIndex(f.index), sub)
	})
}

// jsonMap is [Decoder.mapping] over the bytes.
func (d *Decoder) jsonMap(s *jsonScanner, v reflect.Value, path string) bool {
	if v.IsNil() {
		v.Set(reflect.MakeMap(v.Type()))
	}
	var seen map[string]int
	return s.object(func(key string, line, _ int) bool {
		sub := d.join(path, key)
		if first, dup := seen[key]; dup {
			d.add(line, sub, "duplicate key (first at line %d)", first)
			return !d.givenUp() && s.skip()
		}
		if seen == nil {
			seen = map[string]int{}
		}
		seen[key] = line
		d.mark(sub, line)
		elem := reflect.New(v.Type().Elem()).Elem()
		if !d.jsonValue(s, elem, sub) {
			return false
		}
		k := reflect.New(v.Type().Key()).Elem()
		k.SetString(key)
		v.SetMapIndex(k, elem)
		return true
	})
}

// jsonSlice is [Decoder.sequence] over the bytes. It counts the items first, so a list of
// 100,000 tasks is allocated once at its size, as the YAML path allocates it.
func (d *Decoder) jsonSlice(s *jsonScanner, v reflect.Value, path string) bool {
	n, ok := s.count()
	if !ok {
		return false
	}
	sl := reflect.MakeSlice(v.Type(), n, n)
	i := 0
	ok = s.array(func() bool {
		if i == n {
			return false
		}
		if d.stopped {
			i++
			return !d.nomark && s.skip()
		}
		p := ""
		if !d.nomark {
			p = path + "[" + strconv.Itoa(i) + "]"
		}
		ok := d.jsonValue(s, sl.Index(i), p)
		i++
		return ok
	})
	if !ok || i != n {
		return false
	}
	v.Set(sl)
	return true
}

// jsonPlain is [Decoder.plain] over the bytes; good false: give up.
func (d *Decoder) jsonPlain(s *jsonScanner, path *anyPath, depth int) (val any, ok, good bool) {
	if d.stopped {
		return nil, false, !d.nomark && s.skip()
	}
	switch s.peek() {
	case '{':
		if depth >= maxDepth {
			return nil, false, false
		}
		m := map[string]any{}
		ok = true
		good = s.object(func(key string, line, _ int) bool {
			sub := &anyPath{parent: path, key: key, index: -1}
			if _, dup := m[key]; dup {
				d.add(line, sub.String(), "duplicate key")
				ok = false
				return !d.givenUp() && s.skip()
			}
			val, vok, good := d.jsonPlain(s, sub, depth+1)
			ok = ok && vok
			m[key] = val
			return good
		})
		return m, ok, good
	case '[':
		if depth >= maxDepth {
			return nil, false, false
		}
		l := []any{}
		ok = true
		good = s.array(func() bool {
			val, vok, good := d.jsonPlain(s, &anyPath{parent: path, index: len(l)}, depth+1)
			ok = ok && vok
			l = append(l, val)
			return good
		})
		return l, ok, good
	}
	if !s.scalarInto(&d.scratch) {
		return nil, false, false
	}
	val, ok = d.plain(&d.scratch, path, depth)
	return val, ok, !d.givenUp()
}

// jsonScanner reads JSON bytes; every method returns false at what it does not take, and a
// failure is final (bad).
type jsonScanner struct {
	b         []byte
	i         int
	line      int // line of b[i], from 1
	lineStart int // offset of the line's first byte
	// colOff and col cache the column (in characters, as yaml.v3 counts, from 0) of an
	// offset on the current line, so columns cost one pass over a long line.
	colOff, col int
	flow        int // mappings and lists open around i
	bad         bool
}

func (s *jsonScanner) fail() bool {
	s.bad = true
	return false
}

func (s *jsonScanner) peek() byte {
	if s.bad || s.i >= len(s.b) {
		return 0
	}
	return s.b[s.i]
}

// ws skips blanks and line breaks. YAML takes a tab as a blank only inside a flow collection
// (at the root a tab may start a block), and a lone carriage return as a line break.
func (s *jsonScanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ':
		case '\t':
			if s.flow == 0 {
				s.bad = true
				return
			}
		case '\n':
			s.line++
			s.lineStart = s.i + 1
		case '\r':
			if s.i+1 == len(s.b) || s.b[s.i+1] != '\n' {
				s.bad = true
				return
			}
		default:
			return
		}
		s.i++
	}
}

// pos is the line and column (both from 1) of b[i].
func (s *jsonScanner) pos() (line, col int) {
	if s.colOff < s.lineStart {
		s.colOff, s.col = s.lineStart, 0
	}
	for s.colOff < s.i {
		if s.b[s.colOff] < utf8.RuneSelf {
			s.colOff++
		} else {
			_, n := utf8.DecodeRune(s.b[s.colOff:])
			s.colOff += n
		}
		s.col++
	}
	return s.line, s.col + 1
}

// open enters a mapping or list at b[i]; nesting past what Decode takes is YAML's to judge.
func (s *jsonScanner) open() bool {
	s.i++
	s.flow++
	if s.flow > maxDepth+1 {
		return s.fail()
	}
	s.ws()
	return !s.bad
}

// object reads the mapping at b[i], calling member with each key, its line and column, and
// the scanner at the value, which member consumes.
func (s *jsonScanner) object(member func(key string, line, col int) bool) bool {
	if !s.open() {
		return false
	}
	if s.peek() == '}' {
		s.i++
		s.flow--
		return true
	}
	for {
		if s.peek() != '"' {
			return s.fail()
		}
		start := s.i
		line, col := s.pos()
		key, ok := s.str()
		if !ok {
			return false
		}
		s.ws()
		if s.peek() != ':' || s.line != line || s.i-start > maxKeyBytes {
			return s.fail()
		}
		s.i++
		s.ws()
		if s.bad || !member(key, line, col) {
			return s.fail()
		}
		s.ws()
		switch s.peek() {
		case ',':
			s.i++
			s.ws()
		case '}':
			s.i++
			s.flow--
			return true
		default:
			return s.fail()
		}
	}
}

// array reads the list at b[i], calling item with the scanner at each item, which item
// consumes.
func (s *jsonScanner) array(item func() bool) bool {
	if !s.open() {
		return false
	}
	if s.peek() == ']' {
		s.i++
		s.flow--
		return true
	}
	for {
		if !item() {
			return s.fail()
		}
		s.ws()
		switch s.peek() {
		case ',':
			s.i++
			s.ws()
		case ']':
			s.i++
			s.flow--
			return true
		default:
			return s.fail()
		}
	}
}

// count returns the number of items of the list at b[i] without moving: its commas outside
// strings and nested collections, plus one unless it is empty. The list is read for real
// afterwards, so a malformed one only has to be miscounted, never accepted.
func (s *jsonScanner) count() (int, bool) {
	n, depth, empty := 0, 0, true
	for i := s.i; i < len(s.b); i++ {
		switch c := s.b[i]; c {
		case '"':
			empty = false
			for i++; i < len(s.b) && s.b[i] != '"'; i++ {
				if s.b[i] == '\\' {
					i++
				}
			}
		case '[', '{':
			if depth > 0 {
				empty = false
			}
			depth++
		case ']', '}':
			depth--
			if depth == 0 {
				if empty {
					return 0, true
				}
				return n + 1, true
			}
		case ',':
			if depth == 1 {
				n++
			}
		case ' ', '\t', '\n', '\r':
		default:
			empty = false
		}
	}
	return 0, s.fail()
}

// skip reads the value at b[i] and discards it.
func (s *jsonScanner) skip() bool {
	switch s.peek() {
	case '{':
		return s.object(func(string, int, int) bool { return s.skip() })
	case '[':
		return s.array(s.skip)
	}
	_, ok := s.scalar()
	return ok
}

// node reads the value at b[i] as the node yaml.v3 builds for it.
func (s *jsonScanner) node() (*yaml.Node, bool) {
	c := s.peek()
	if c != '{' && c != '[' {
		n, ok := s.scalar()
		return &n, ok
	}
	line, col := s.pos()
	n := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle, Tag: "!!map", Line: line, Column: col}
	if c == '[' {
		n.Kind, n.Tag = yaml.SequenceNode, "!!seq"
		return n, s.array(func() bool {
			item, ok := s.node()
			n.Content = append(n.Content, item)
			return ok
		})
	}
	return n, s.object(func(key string, line, col int) bool {
		k := &yaml.Node{Kind: yaml.ScalarNode, Style: yaml.DoubleQuotedStyle, Tag: "!!str", Value: key, Line: line, Column: col}
		val, ok := s.node()
		n.Content = append(n.Content, k, val)
		return ok
	})
}

// scalar reads the string, number, true, false or null at b[i] as yaml.v3's node for it.
func (s *jsonScanner) scalar() (yaml.Node, bool) {
	var n yaml.Node
	ok := s.scalarInto(&n)
	return n, ok
}

// scalarInto is scalar writing into n, every field set.
func (s *jsonScanner) scalarInto(n *yaml.Node) bool {
	line, col := s.pos()
	*n = yaml.Node{Kind: yaml.ScalarNode, Line: line, Column: col}
	switch c := s.peek(); {
	case c == '"':
		v, ok := s.str()
		n.Style, n.Tag, n.Value = yaml.DoubleQuotedStyle, "!!str", v
		return ok
	case c == 't':
		return s.literal(n, "true", "!!bool")
	case c == 'f':
		return s.literal(n, "false", "!!bool")
	case c == 'n':
		return s.literal(n, "null", "!!null")
	case c == '-' || c >= '0' && c <= '9':
		return s.number(n)
	}
	return s.fail()
}

func (s *jsonScanner) literal(n *yaml.Node, word, tag string) bool {
	if len(s.b)-s.i < len(word) || string(s.b[s.i:s.i+len(word)]) != word {
		return s.fail()
	}
	s.i += len(word)
	n.Tag, n.Value = tag, word
	return true
}

// number reads a JSON number. yaml.v3 resolves one without a fraction or exponent to !!int
// when it fits an int64 and the rest to !!float when it parses as a float64; the others (an
// integer past int64, a float past float64) resolve otherwise and are its to read.
func (s *jsonScanner) number(n *yaml.Node) bool {
	start := s.i
	s.eat('-')
	switch {
	case s.eat('0'):
	case s.digits() == 0:
		return s.fail()
	}
	float := false
	if s.eat('.') {
		if s.digits() == 0 {
			return s.fail()
		}
		float = true
	}
	if s.eat('e') || s.eat('E') {
		if !s.eat('+') {
			s.eat('-')
		}
		if s.digits() == 0 {
			return s.fail()
		}
		float = true
	}
	text := string(s.b[start:s.i])
	n.Value, n.Tag = text, "!!int"
	if float {
		n.Tag = "!!float"
		if _, err := strconv.ParseFloat(text, 64); err != nil {
			return s.fail()
		}
	} else if _, err := strconv.ParseInt(text, 10, 64); err != nil {
		return s.fail()
	}
	return true
}

func (s *jsonScanner) eat(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *jsonScanner) digits() int {
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i - start
}

// str reads the string at b[i] (its opening quote) and returns its value.
func (s *jsonScanner) str() (string, bool) {
	s.i++
	start := s.i
	for s.i < len(s.b) {
		switch c := s.b[s.i]; {
		case c == '"':
			v := string(s.b[start:s.i])
			s.i++
			return v, true
		case c == '\\':
			return s.escaped(start)
		case !s.char():
			return "", false
		}
	}
	return "", s.fail()
}

// escaped reads the rest of a string that holds an escape, from start (after the quote).
func (s *jsonScanner) escaped(start int) (string, bool) {
	buf := append([]byte(nil), s.b[start:s.i]...)
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return string(buf), true
		case c == '\\':
			if s.i+1 == len(s.b) {
				return "", s.fail()
			}
			s.i += 2
			switch s.b[s.i-1] {
			case '"', '\\':
				buf = append(buf, s.b[s.i-1])
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				if len(s.b)-s.i < 4 {
					return "", s.fail()
				}
				r, err := strconv.ParseUint(string(s.b[s.i:s.i+4]), 16, 32)
				if err != nil || r >= 0xD800 && r <= 0xDFFF {
					return "", s.fail()
				}
				s.i += 4
				buf = utf8.AppendRune(buf, rune(r))
			default: // \/ among them: YAML has no such escape
				return "", s.fail()
			}
		default:
			from := s.i
			if !s.char() {
				return "", false
			}
			buf = append(buf, s.b[from:s.i]...)
		}
	}
	return "", s.fail()
}

// char moves past one unescaped character of a string, one that JSON and YAML both take
// as itself: printable ASCII, or valid UTF-8 that YAML allows in a document and does not
// take as a line break (no C1 control, U+2028, U+2029, byte order mark or noncharacter
// U+FFFE and U+FFFF).
func (s *jsonScanner) char() bool {
	c := s.b[s.i]
	if c < utf8.RuneSelf {
		if c < 0x20 || c == 0x7f {
			return s.fail()
		}
		s.i++
		return true
	}
	r, n := utf8.DecodeRune(s.b[s.i:])
	switch {
	case r == utf8.RuneError && n == 1, r < 0xA0, r == 0x2028, r == 0x2029, r == 0xFEFF, r == 0xFFFE, r == 0xFFFF:
		return s.fail()
	}
	s.i += n
	return true
}
