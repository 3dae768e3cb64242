// Package jcs encodes values as RFC 8785 (JSON Canonicalization Scheme) bytes, so that whatever
// agora hashes (audit entries, catalog documents) has exactly one byte form.
package jcs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Marshal encodes v as RFC 8785 (JSON Canonicalization Scheme) bytes. v may hold nil, bool,
// string (valid UTF-8), int, int64, uint64, float64 (finite and integral), json.Number (as
// decoded with UseNumber: the same rules), []any, []string, map[string]any and
// map[string]string. Numbers must lie within ±2^53, so every reader's
// IEEE 754 double gets them exactly and the encoding is unambiguous. Anything else is an error:
// audit entries are built from these types only, so their bytes are stable.
func Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	if err := encode(&b, v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Field is one member of an object [AppendObject] encodes.
type Field struct {
	Key   string
	Value any // a type [Marshal] accepts
}

// AppendObject appends to dst the object of fields as [Marshal] encodes a map[string]any
// holding them, to the same bytes. The fields MUST come in RFC 8785 key order with no key
// twice; others are refused, never reordered. A caller with a fixed set of keys (an audit
// entry's envelope, written for every entry) so builds and sorts no map for them, and a writer
// that encodes object after object (an audit batch's entries) can keep them in one buffer it
// reuses. On an error dst's bytes are unchanged, though more may have been written past them.
func AppendObject(dst []byte, fields ...Field) ([]byte, error) {
	b := bytes.NewBuffer(dst)
	b.WriteByte('{')
	for i, f := range fields {
		if i > 0 {
			if compareUTF16(fields[i-1].Key, f.Key) >= 0 {
				return nil, fmt.Errorf("canonical json: object key %q after %q is out of order", f.Key, fields[i-1].Key)
			}
			b.WriteByte(',')
		}
		if err := encodeString(b, f.Key); err != nil {
			return nil, err
		}
		b.WriteByte(':')
		if err := encode(b, f.Value); err != nil {
			return nil, err
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func encode(b *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case string:
		return encodeString(b, x)
	case int:
		return encode(b, int64(x))
	case int64:
		if x > 1<<53 || x < -(1<<53) {
			return fmt.Errorf("canonical json: integer %d outside the exact range of IEEE 754", x)
		}
		b.WriteString(strconv.FormatInt(x, 10))
	case uint64:
		if x > 1<<53 {
			return fmt.Errorf("canonical json: integer %d outside the exact range of IEEE 754", x)
		}
		b.WriteString(strconv.FormatUint(x, 10))
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return encode(b, i)
		}
		f, err := x.Float64()
		if err != nil {
			return fmt.Errorf("canonical json: number %.24s is out of range", x)
		}
		return encode(b, f)
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) || x != math.Trunc(x) || math.Abs(x) > 1<<53 {
			return fmt.Errorf("canonical json: only integral numbers are allowed, got %v", x)
		}
		if x == 0 {
			x = 0 // RFC 8785 (ECMAScript) writes -0 as 0
		}
		b.WriteString(strconv.FormatFloat(x, 'f', -1, 64))
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := encode(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case []string:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := encodeString(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case map[string]string:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = e
		}
		return encode(b, m)
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		// RFC 8785 orders keys by their UTF-16 code units.
		slices.SortFunc(keys, compareUTF16)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := encodeString(b, k); err != nil {
				return err
			}
			b.WriteByte(':')
			if err := encode(b, x[k]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	default:
		return fmt.Errorf("canonical json: unsupported type %T", v)
	}
	return nil
}

// compareUTF16 orders a and b by their UTF-16 code units without encoding them. The orders
// of code points and of UTF-16 units differ in one place only: a supplementary rune (two
// units, the first in D800-DBFF) sorts before U+E000-U+FFFF. So at the first differing rune,
// compare the first units; two supplementary runes with the same first unit compare as runes.
func compareUTF16(a, b string) int {
	// Keys are mostly ASCII. At the first byte that differs, two ASCII bytes each start a rune
	// (the bytes before are the same), and those runes are their own UTF-16 units.
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	if i == len(a) || i == len(b) {
		return len(a) - len(b)
	}
	if a[i] < utf8.RuneSelf && b[i] < utf8.RuneSelf {
		return int(a[i]) - int(b[i])
	}
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if ra != rb {
			ua, ub := firstUnit(ra), firstUnit(rb)
			if ua != ub {
				return int(ua) - int(ub)
			}
			return int(ra) - int(rb)
		}
		a, b = a[na:], b[nb:]
	}
	return len(a) - len(b)
}

// firstUnit is r's first UTF-16 code unit.
func firstUnit(r rune) rune {
	if r < 0x10000 {
		return r
	}
	return 0xD800 + (r-0x10000)>>10
}

func encodeString(b *bytes.Buffer, s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("canonical json: string is not valid UTF-8")
	}
	b.WriteByte('"')
	// Copy runs of bytes that need no escape (everything from 0x20 up but '"' and '\\';
	// the string is valid UTF-8) as they are.
	for len(s) > 0 {
		i := 0
		for i < len(s) && s[i] >= 0x20 && s[i] != '"' && s[i] != '\\' {
			i++
		}
		b.WriteString(s[:i])
		if i == len(s) {
			break
		}
		r := s[i]
		s = s[i+1:]
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			fmt.Fprintf(b, `\u%04x`, r)
		}
	}
	b.WriteByte('"')
	return nil
}
