package toolreg

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// maxReasonKey caps how much of an unknown property name an error repeats.
const maxReasonKey = 64

// validate checks args against s: one JSON object, each key declared and present once, each
// value of the declared type and within its bounds, every required key present. It returns
// the reason for the first problem, or "". It never allocates for valid arguments whose
// strings need no length or enum check or carry no escapes.
func (s *objectSchema) validate(args []byte) string {
	if len(bytes.TrimSpace(args)) == 0 {
		return "arguments are empty; want a JSON object"
	}
	if !json.Valid(args) {
		return "arguments are not valid JSON"
	}
	i := skipWS(args, 0)
	if args[i] != '{' {
		return "arguments are a JSON " + jsonKind(args[i]) + "; want an object"
	}
	i = skipWS(args, i+1)
	var seen uint64
	if args[i] != '}' {
		for {
			end := skipString(args, i)
			p, key := s.lookup(args[i:end])
			if p == nil {
				return "unknown property " + quoteCut(key)
			}
			if seen&(1<<p.index) != 0 {
				return "property " + strconv.Quote(key) + " appears twice"
			}
			seen |= 1 << p.index
			i = skipWS(args, end)
			i = skipWS(args, i+1) // the colon
			vend := skipValue(args, i)
			if r := p.check(args[i:vend]); r != "" {
				return "property " + strconv.Quote(key) + ": " + r
			}
			i = skipWS(args, vend)
			if i >= len(args) || args[i] != ',' {
				break
			}
			i = skipWS(args, i+1)
		}
	}
	if missing := s.required &^ seen; missing != 0 {
		for _, name := range s.names {
			if missing&(1<<s.props[name].index) != 0 {
				return "required property " + strconv.Quote(name) + " is missing"
			}
		}
	}
	return ""
}

// lookup finds the property named by the JSON string literal q. When it is found, key is the
// schema's own copy of the name, so the lookup of a key without escapes does not allocate.
func (s *objectSchema) lookup(q []byte) (p *propSchema, key string) {
	if len(q) >= 2 && bytes.IndexByte(q, '\\') < 0 {
		p = s.props[string(q[1:len(q)-1])]
		if p != nil {
			return p, s.names[p.index]
		}
	}
	key, ok := decodeString(q)
	if !ok {
		return nil, "(malformed)"
	}
	if p = s.props[key]; p != nil {
		return p, s.names[p.index]
	}
	return nil, key
}

// check validates one value (a complete JSON value, already known to be well formed).
func (p *propSchema) check(v []byte) string {
	if len(v) == 0 {
		return "missing value"
	}
	switch p.kind {
	case kindString:
		if v[0] != '"' {
			return "want string, got " + jsonKind(v[0])
		}
		return p.checkString(v)
	case kindInteger:
		n, ok := parseInt(v)
		if !ok {
			if v[0] == '-' || (v[0] >= '0' && v[0] <= '9') {
				return "want integer, got a number with a fraction, an exponent or out of range"
			}
			return "want integer, got " + jsonKind(v[0])
		}
		if p.hasMin && n < p.min {
			return "below the minimum " + strconv.FormatInt(p.min, 10)
		}
		if p.hasMax && n > p.max {
			return "above the maximum " + strconv.FormatInt(p.max, 10)
		}
	case kindNumber:
		if v[0] != '-' && (v[0] < '0' || v[0] > '9') {
			return "want number, got " + jsonKind(v[0])
		}
		// Well-formed JSON but beyond a float64 (1e700): the tool would decode ±Inf or fail,
		// so it is refused here as any other value the tool cannot take.
		if _, err := strconv.ParseFloat(string(v), 64); err != nil {
			return "want number, got a number out of range"
		}
	case kindBoolean:
		if v[0] != 't' && v[0] != 'f' {
			return "want boolean, got " + jsonKind(v[0])
		}
	case kindArray:
		if v[0] != '[' {
			return "want array, got " + jsonKind(v[0])
		}
		return p.checkArray(v)
	}
	return ""
}

func (p *propSchema) checkString(v []byte) string {
	if p.minLen < 0 && p.maxLen < 0 && p.enum == nil {
		return ""
	}
	// Without escapes the literal's bytes are the value: measure and compare them in place.
	var b []byte
	if len(v) >= 2 && bytes.IndexByte(v, '\\') < 0 {
		b = v[1 : len(v)-1]
	} else {
		s, ok := decodeString(v)
		if !ok {
			return "malformed string"
		}
		b = []byte(s)
	}
	if p.minLen >= 0 || p.maxLen >= 0 {
		n := utf8.RuneCount(b)
		if p.minLen >= 0 && n < p.minLen {
			return "shorter than " + strconv.Itoa(p.minLen) + " characters"
		}
		if p.maxLen >= 0 && n > p.maxLen {
			return "longer than " + strconv.Itoa(p.maxLen) + " characters"
		}
	}
	if p.enum != nil {
		for _, e := range p.enum {
			if e == string(b) {
				return ""
			}
		}
		return "not one of the allowed values " + quoteList(p.enum)
	}
	return ""
}

func (p *propSchema) checkArray(v []byte) string {
	n := 0
	i := skipWS(v, 1)
	if i < len(v) && v[i] != ']' {
		for {
			end := skipValue(v, i)
			if r := p.items.check(v[i:end]); r != "" {
				return "item " + strconv.Itoa(n) + ": " + r
			}
			n++
			i = skipWS(v, end)
			if i >= len(v) || v[i] != ',' {
				break
			}
			i = skipWS(v, i+1)
		}
	}
	if p.minItems >= 0 && n < p.minItems {
		return "fewer than " + strconv.Itoa(p.minItems) + " items"
	}
	if p.maxItems >= 0 && n > p.maxItems {
		return "more than " + strconv.Itoa(p.maxItems) + " items"
	}
	return ""
}

// The scanners below walk JSON already accepted by json.Valid; their bounds checks only
// keep them from panicking if that promise is ever broken.

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	if i >= len(b) {
		return len(b) - 1 // json.Valid guarantees a closing token; stay in range regardless
	}
	return i
}

// skipString returns the index just past the string starting at b[i] == '"'.
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// skipValue returns the index just past the value starting at b[i].
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return len(b)
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return len(b)
	default:
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
			i++
		}
		return len(b)
	}
}

// decodeString returns the value of the JSON string literal q.
func decodeString(q []byte) (string, bool) {
	if len(q) < 2 || q[0] != '"' || q[len(q)-1] != '"' {
		return "", false
	}
	if bytes.IndexByte(q, '\\') < 0 {
		return string(q[1 : len(q)-1]), true
	}
	var s string
	if err := json.Unmarshal(q, &s); err != nil {
		return "", false
	}
	return s, true
}

// parseInt parses a JSON integer literal (no fraction, no exponent) that fits in int64.
func parseInt(v []byte) (int64, bool) {
	neg := false
	i := 0
	if i < len(v) && v[i] == '-' {
		neg = true
		i++
	}
	if i == len(v) {
		return 0, false
	}
	var n uint64
	for ; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (1<<63)/10 || n*10 > 1<<63-d {
			return 0, false
		}
		n = n*10 + d
	}
	if neg {
		return -int64(n), true // n == 1<<63 wraps to math.MinInt64, which is right
	}
	if n > 1<<63-1 {
		return 0, false
	}
	return int64(n), true
}

func jsonKind(c byte) string {
	switch c {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	default:
		return "number"
	}
}

func quoteCut(s string) string {
	if len(s) > maxReasonKey {
		cut := maxReasonKey
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return strconv.Quote(s[:cut]) + "…"
	}
	return strconv.Quote(s)
}

func quoteList(l []string) string {
	s := ""
	for i, e := range l {
		if i > 0 {
			s += ", "
		}
		s += strconv.Quote(e)
	}
	return s
}
