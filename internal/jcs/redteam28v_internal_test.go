package jcs

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

// refCompare is RFC 8785's key order the slow way: both keys as UTF-16 units, unit by unit.
func refCompare(a, b string) int {
	return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
}

func sign(x int) int {
	switch {
	case x < 0:
		return -1
	case x > 0:
		return 1
	}
	return 0
}

// trickyRunes sit on both sides of every boundary the fast path and the surrogate rule meet:
// ASCII, two- and three-byte runes, the BMP's private-use and last runes (which sort after
// every supplementary rune in UTF-16), and supplementary runes sharing and not sharing a lead
// surrogate.
var trickyRunes = []rune{0, 'A', 'a', 0x7f, 0x80, 'é', 0x7ff, 0x800, 0xd7ff, 0xe000, 0xfeff, 0xffff,
	0x10000, 0x103ff, 0x10400, 0x1f600, 0x1f601, 0x10fc00, 0x10ffff}

func randomKey(r *rand.Rand) string {
	var b strings.Builder
	for range r.IntN(5) {
		b.WriteRune(trickyRunes[r.IntN(len(trickyRunes))])
	}
	return b.String()
}

// compareUTF16 with its ASCII fast path orders every pair of valid keys
// as UTF-16 units do, sign for sign, including equal keys, prefixes and a first difference
// between an ASCII byte and a multi-byte rune.
func TestRedTeam28V_CompareUTF16MatchesTheUnits(t *testing.T) {
	r := rand.New(rand.NewPCG(28, 3))
	for range 200000 {
		a, b := randomKey(r), randomKey(r)
		if r.IntN(4) == 0 { // a shared prefix, so the first difference falls anywhere
			p := randomKey(r)
			a, b = p+a, p+b
		}
		if got, want := sign(compareUTF16(a, b)), sign(refCompare(a, b)); got != want {
			t.Fatalf("compareUTF16(%q, %q) = %d, UTF-16 order %d", a, b, got, want)
		}
	}
}

// FuzzRedTeam28VCompareUTF16 is the same comparison for fuzzed keys; two keys that are not
// valid UTF-8 never compare equal unless they are equal, in MarshalObject's order check.
func FuzzRedTeam28VCompareUTF16(f *testing.F) {
	f.Add("a\uffff", "a😀")
	f.Add("ab", "a")
	f.Add("\xff", "\xfe")
	f.Fuzz(func(t *testing.T, a, b string) {
		got := compareUTF16(a, b)
		if !utf8.ValidString(a) || !utf8.ValidString(b) {
			if _, err := MarshalObject(Field{Key: a, Value: 0}, Field{Key: b, Value: 1}); err == nil {
				t.Fatalf("MarshalObject(%q, %q) took an invalid key", a, b)
			}
			return
		}
		if want := sign(refCompare(a, b)); sign(got) != want {
			t.Fatalf("compareUTF16(%q, %q) = %d, UTF-16 order %d", a, b, got, want)
		}
	})
}

// A details map of many tricky keys (as a model's tool-call arguments
// could carry) is written in UTF-16 key order, read back from the bytes, not from the sort.
func TestRedTeam28V_ManyKeysInUTF16Order(t *testing.T) {
	r := rand.New(rand.NewPCG(28, 4))
	for range 500 {
		m := map[string]any{}
		for range 1 + r.IntN(40) {
			m[randomKey(r)] = 1
		}
		body, err := MarshalObject(Field{Key: "details", Value: m})
		if err != nil {
			t.Fatal(err)
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, refCompare)
		var want strings.Builder
		want.WriteString(`{"details":{`)
		for i, k := range keys {
			if i > 0 {
				want.WriteByte(',')
			}
			b, _ := Marshal(k)
			want.Write(b)
			want.WriteString(":1")
		}
		want.WriteString("}}")
		if string(body) != want.String() {
			t.Fatalf("MarshalObject = %s\nwant          %s", body, want.String())
		}
	}
}

// MarshalObject is [AppendObject] into a new buffer.
func MarshalObject(fields ...Field) ([]byte, error) {
	return AppendObject(make([]byte, 0, 512), fields...)
}
