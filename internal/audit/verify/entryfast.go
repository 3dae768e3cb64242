package verify

import (
	"bytes"
	"time"
)

// decodeCanonical is [DecodeEntry] for the entries agora writes, without encoding/json and a
// re-encoding: it walks b once and takes it only when b is surely RFC 8785 JSON, as
// jcs.Marshal would write its value: no whitespace, object keys of printable ASCII in
// strictly increasing order (so none twice), strings of printable ASCII with no escape,
// integers in plain decimal within ±2^53 (not -0), true, false, null, at most maxFastDepth
// levels, nothing after the object; and the object is an entry (exactly the six keys, seq a
// non-negative integer, time RFC 3339, actor, kind and subject strings, details an object).
// Anything else returns ok false and DecodeEntry's own reading decides, with its error, so
// the two never disagree (FuzzDecodeEntry_FastMatchesSlow holds it to that). Checking a
// 100,000-entry bundle spent most of its time decoding entries into maps and encoding them
// again.
func decodeCanonical(b []byte) (f EntryFields, ok bool) {
	p := &canonWalker{b: b}
	v, ok := p.value(0)
	if !ok || p.i != len(b) {
		return f, false
	}
	m, isMap := v.(map[string]any)
	if !isMap || len(m) != len(entryKeys) {
		return f, false
	}
	seq, okQ := m["seq"].(int64)
	at, okT := m["time"].(string)
	var okA, okK, okS, okD bool
	f.Actor, okA = m["actor"].(string)
	f.Kind, okK = m["kind"].(string)
	f.Subject, okS = m["subject"].(string)
	f.Details, okD = m["details"].(map[string]any)
	if !okQ || seq < 0 || !okT || !okA || !okK || !okS || !okD {
		return f, false
	}
	f.Seq = uint64(seq)
	var err error
	if f.Time, err = time.Parse(time.RFC3339Nano, at); err != nil {
		return f, false
	}
	return f, true
}

// maxFastDepth bounds the nesting decodeCanonical takes; deeper entries go the slow way.
const maxFastDepth = 32

type canonWalker struct {
	b []byte
	i int
}

func (p *canonWalker) value(depth int) (any, bool) {
	if p.i >= len(p.b) || depth > maxFastDepth {
		return nil, false
	}
	switch c := p.b[p.i]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		s, ok := p.str()
		return string(s), ok
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	}
	for _, lit := range []struct {
		text string
		v    any
	}{{"true", true}, {"false", false}, {"null", nil}} {
		if bytes.HasPrefix(p.b[p.i:], []byte(lit.text)) {
			p.i += len(lit.text)
			return lit.v, true
		}
	}
	return nil, false
}

func (p *canonWalker) object(depth int) (any, bool) {
	p.i++ // '{'
	m := map[string]any{}
	var prev []byte
	for first := true; ; first = false {
		if p.i < len(p.b) && p.b[p.i] == '}' {
			p.i++
			return m, true
		}
		if !first {
			if p.i >= len(p.b) || p.b[p.i] != ',' {
				return nil, false
			}
			p.i++
		}
		key, ok := p.str()
		// For ASCII keys RFC 8785's UTF-16 order is byte order.
		if !ok || (!first && bytes.Compare(prev, key) >= 0) {
			return nil, false
		}
		prev = key
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return nil, false
		}
		p.i++
		v, ok := p.value(depth + 1)
		if !ok {
			return nil, false
		}
		m[string(key)] = v
	}
}

func (p *canonWalker) array(depth int) (any, bool) {
	p.i++ // '['
	a := []any{}
	for first := true; ; first = false {
		if p.i < len(p.b) && p.b[p.i] == ']' {
			p.i++
			return a, true
		}
		if !first {
			if p.i >= len(p.b) || p.b[p.i] != ',' {
				return nil, false
			}
			p.i++
		}
		v, ok := p.value(depth + 1)
		if !ok {
			return nil, false
		}
		a = append(a, v)
	}
}

// str reads a string of printable ASCII with no escape.
func (p *canonWalker) str() ([]byte, bool) {
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return nil, false
	}
	start := p.i + 1
	for j := start; j < len(p.b); j++ {
		switch c := p.b[j]; {
		case c == '"':
			p.i = j + 1
			return p.b[start:j], true
		case c < 0x20 || c >= 0x7f || c == '\\':
			return nil, false
		}
	}
	return nil, false
}

// number reads an integer as RFC 8785 writes it: -?(0|[1-9][0-9]*), within ±2^53, not -0.
func (p *canonWalker) number() (any, bool) {
	v, ok := p.integer()
	if !ok {
		return nil, false
	}
	return v, true
}

// integer is [canonWalker.number] without boxing its value.
func (p *canonWalker) integer() (int64, bool) {
	neg := p.b[p.i] == '-'
	if neg {
		p.i++
	}
	digits := p.i
	var v int64
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		if p.i-digits >= 16 {
			return 0, false
		}
		v = v*10 + int64(p.b[p.i]-'0')
		p.i++
	}
	n := p.i - digits
	switch {
	case n == 0, n > 1 && p.b[digits] == '0', v > 1<<53, neg && v == 0:
		return 0, false
	case p.i < len(p.b) && (p.b[p.i] == '.' || p.b[p.i] == 'e' || p.b[p.i] == 'E'):
		return 0, false
	}
	if neg {
		v = -v
	}
	return v, true
}
