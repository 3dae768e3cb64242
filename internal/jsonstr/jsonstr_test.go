package jsonstr

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

var samples = []string{
	"", "plain", `"quoted" \ back\slash`, "\x00\x01\b\f\n\r\t\x1f\x7f", "<a href=x>&amp;</a>",
	"bad \xff\xfe utf-8 \xc3", "line\u2028para\u2029end", "héllo wörld ✓ 日本", "\xed\xa0\x80 surrogate",
	"\xe2\x80", "\xe2\x80\xa8\xe2", "\xf4\x90\x80\x80 past U+10FFFF", "\xc0\xaf overlong",
}

func check(t *testing.T, s string) {
	t.Helper()
	want, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := Append(nil, s); !bytes.Equal(got, want) {
		t.Fatalf("Append(%q) = %s, want %s", s, got, want)
	}
}

func TestAppend_AsEncodingJSON(t *testing.T) {
	for _, s := range samples {
		check(t, s)
	}
	for r := rune(0); r <= utf8.MaxRune; r++ {
		check(t, string(r))
	}
	for b := 0; b < 256; b++ {
		check(t, string([]byte{byte(b)}))
		check(t, "x"+string([]byte{byte(b)})+"y")
	}
}

func FuzzAppend(f *testing.F) {
	for _, s := range samples {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { check(t, s) })
}
