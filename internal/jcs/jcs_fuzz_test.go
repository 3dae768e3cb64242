package jcs_test

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/agora-dev/agora/internal/jcs"
)

// FuzzMarshal checks that any valid UTF-8 string encodes to JSON that decodes back to the same
// string, both as a value and as a key, and that invalid UTF-8 is refused.
func FuzzMarshal(f *testing.F) {
	for _, s := range []string{"", "a", "\"\\/", "\x00\x1f\x7f", "€😀\u2028", "\ufeff", "\xff", "\xed\xa0\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := jcs.Marshal(s)
		if !utf8.ValidString(s) {
			if err == nil {
				t.Fatalf("Marshal(%q) = %s, want an error for invalid UTF-8", s, b)
			}
			return
		}
		if err != nil {
			t.Fatalf("Marshal(%q): %v", s, err)
		}
		if !json.Valid(b) {
			t.Fatalf("Marshal(%q) = %s: not valid JSON", s, b)
		}
		var got string
		if err := json.Unmarshal(b, &got); err != nil || got != s {
			t.Fatalf("Marshal(%q) = %s, decodes to %q (%v)", s, b, got, err)
		}
		b, err = jcs.Marshal(map[string]any{s: []string{s}})
		if err != nil {
			t.Fatalf("Marshal(map with %q): %v", s, err)
		}
		var m map[string][]string
		if err := json.Unmarshal(b, &m); err != nil || len(m) != 1 || len(m[s]) != 1 || m[s][0] != s {
			t.Fatalf("Marshal(map with %q) = %s, decodes to %q (%v)", s, b, m, err)
		}
	})
}

// FuzzKeyOrder checks Marshal's key order against the RFC 8785 rule computed the slow way:
// both keys encoded to UTF-16, compared unit by unit.
func FuzzKeyOrder(f *testing.F) {
	for _, p := range [][2]string{{"a", "b"}, {"\uffff", "😀"}, {"\ue000", "\U00010000"}, {"😀", "😁"}, {"ab", "a"}, {"€", "\u00e9"}} {
		f.Add(p[0], p[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if a == b || !utf8.ValidString(a) || !utf8.ValidString(b) {
			return
		}
		out, err := jcs.Marshal(map[string]any{a: 0, b: 1})
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(bytes.NewReader(out))
		dec.Token() // {
		first, err := dec.Token()
		if err != nil {
			t.Fatalf("Marshal = %s: %v", out, err)
		}
		want := a
		if slices.Compare(utf16.Encode([]rune(b)), utf16.Encode([]rune(a))) < 0 {
			want = b
		}
		if first != want {
			t.Fatalf("Marshal(%q, %q) = %s: first key %q, want %q", a, b, out, first, want)
		}
		// MarshalObject writes the same bytes from the keys in that order, and refuses
		// them in the other.
		second := a
		if want == a {
			second = b
		}
		vals := map[string]any{a: 0, b: 1}
		obj, err := jcs.MarshalObject(jcs.Field{Key: want, Value: vals[want]}, jcs.Field{Key: second, Value: vals[second]})
		if err != nil || !bytes.Equal(obj, out) {
			t.Fatalf("MarshalObject(%q, %q) = %s, %v; Marshal of the map = %s", want, second, obj, err, out)
		}
		if _, err := jcs.MarshalObject(jcs.Field{Key: second, Value: 0}, jcs.Field{Key: want, Value: 1}); err == nil {
			t.Fatalf("MarshalObject(%q, %q) out of order was accepted", second, want)
		}
	})
}
