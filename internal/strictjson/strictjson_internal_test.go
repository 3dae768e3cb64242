package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestFoldKey_ASCIIFastPath: the ASCII shortcut folds every byte as the rune-by-rune fold does.
func TestFoldKey_ASCIIFastPath(t *testing.T) {
	for c := range utf8.RuneSelf {
		k := string(rune(c)) + "x"
		if got, want := foldKey(k), foldRunes(k); got != want {
			t.Errorf("foldKey(%q) = %q, foldRunes = %q", k, got, want)
		}
	}
	if foldKey("kind") != foldKey("\u212Aind") || foldKey("state") != foldKey("STATE") || foldKey("s") != foldKey("\u017F") {
		t.Error("keys equal under case folding fold apart")
	}
}

// tokenWalk is the reference the byte walker replaced: the same checks over json.Decoder
// tokens, slower but plainly right. FuzzWalk_MatchesTokenWalk holds the two to one answer.
func tokenWalk(b []byte, want *shape) error {
	if !utf8.Valid(b) {
		return errors.New("not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := tokenValue(dec, 0, want); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the JSON document")
	}
	return nil
}

func tokenValue(dec *json.Decoder, depth int, want *shape) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if n, ok := tok.(json.Number); ok {
		return checkNumber(n)
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	if depth >= MaxDepth {
		return errors.New("too deep")
	}
	seen := map[string]bool{}
	for dec.More() {
		var next *shape
		if d == '{' {
			kt, err := dec.Token()
			if err != nil {
				return err
			}
			k := kt.(string)
			if seen[foldRunes(k)] {
				return errors.New("duplicate key")
			}
			seen[foldRunes(k)] = true
			if want != nil {
				if next, err = want.field(k); err != nil {
					return err
				}
			}
		} else if want != nil {
			next = want.elem
		}
		if err := tokenValue(dec, depth+1, next); err != nil {
			return err
		}
	}
	_, err = dec.Token()
	return err
}

type walkDoc struct {
	Kind  string            `json:"kind"`
	Items []walkDoc         `json:"items"`
	Tags  map[string]string `json:"tags"`
	Any   any               `json:"any"`
}

// FuzzWalk_MatchesTokenWalk: the byte walker accepts exactly what the token walker accepts,
// untyped (Check) and against a struct (Unmarshal).
func FuzzWalk_MatchesTokenWalk(f *testing.F) {
	for _, s := range []string{`{"kind":"a","items":[{"kind":"b"}]}`, `{"Kind":1}`, `{"kind":"a","\u212Aind":"b"}`,
		`{"k\u0069nd":"x"}`, `{"a":"\"}","b":[1e400]}`, `[{"tags":{"A":"1","a":"2"}}]`, " [ 1 , -2.5e3 , true , null ] ",
		`{"any":{"x":{"X":1}}}`, `{} {}`, `{"a":}`, strings.Repeat("[", 70) + strings.Repeat("]", 70)} {
		f.Add([]byte(s))
	}
	doc := shapeOf(reflect.TypeFor[walkDoc]())
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, want := range []*shape{nil, doc} {
			_, got := check(b, want)
			ref := tokenWalk(b, want)
			if (got == nil) != (ref == nil) {
				t.Fatalf("shape %v: byte walker says %v, token walker %v", want != nil, got, ref)
			}
		}
	})
}

// FuzzKeySet_MatchesFold: keySet (ASCII keys kept as they are, compared regardless of ASCII
// case) finds exactly the duplicates a set of fully folded keys finds, before and after it
// turns into a map, and shape.foldedField agrees with a lookup of the folded key.
func FuzzKeySet_MatchesFold(f *testing.F) {
	f.Add("kind,\u212Aind", "KIND")
	f.Add("s,S,\u017F", "\u017Fub")
	f.Add("a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q,r,S,\u017F,K", "sub")
	f.Add("\u00e9,\u00c9,x_1,X_1", "\u00c9")
	f.Fuzz(func(t *testing.T, list, k string) {
		var s keySet
		seen := map[string]bool{}
		for _, k := range strings.Split(list, ",") {
			want := !seen[foldRunes(k)]
			seen[foldRunes(k)] = true
			if got := s.add(k); got != want {
				t.Fatalf("add(%q) after %q = %v, want %v", k, list, got, want)
			}
		}
		sh := &shape{folded: map[string]string{foldKey(k): k}}
		for _, x := range strings.Split(list, ",") {
			if got, want := sh.foldedField(x), foldRunes(x) == foldRunes(k); got != want {
				t.Fatalf("foldedField(%q) with field %q = %v, want %v", x, k, got, want)
			}
		}
	})
}

// FuzzWalk_SyntaxMatchesJSONValid: the walk, which no longer follows json.Valid, refuses the
// syntax of exactly the documents json.Valid refuses (of valid UTF-8, which is checked before
// it). A walk refusing something else first (a duplicate key, a depth, a number's range) says
// nothing about the syntax after it and is skipped.
func FuzzWalk_SyntaxMatchesJSONValid(f *testing.F) {
	for _, s := range []string{`{"a":[1,-0.5e+3,true,false,null,"x\u00e9\n"]}`, `{"a":1,}`, `[1,]`, `[,1]`, `{,"a":1}`,
		`{"a" 1}`, `{"a":1 "b":2}`, `01`, `-`, `1.`, `1e`, `.5`, `+1`, `tru`, `nul`, `truex`, `"\x"`, `"\u12g4"`,
		"\"\t\"", `"abc`, `{"a":"b"`, `[`, ``, ` `, `{} {}`, `[1] `, `"\/\b\f\r\"\\"`, `1E+2`, `-0`, `[[[]]]`, `{"":{}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !utf8.Valid(b) {
			return
		}
		w := walker{b: b}
		_, err := w.value(0, nil)
		if err == nil {
			if w.space(); w.i != len(b) {
				err = errSyntax
			}
		}
		valid := json.Valid(b)
		switch {
		case err == nil && !valid:
			t.Fatalf("the walk accepts %q, json.Valid refuses it", b)
		case errors.Is(err, errSyntax) && valid:
			t.Fatalf("the walk refuses the syntax of %q, json.Valid accepts it", b)
		}
		// The walk and encoding/json disagreeing is the bug this looks for; a number refused
		// because other readers would disagree on its value (more than 800 digits)
		// is a deliberate refusal of valid JSON.
		if _, err := check(b, nil); err != nil && valid && strings.Contains(err.Error(), "strictjson and encoding/json disagree") {
			t.Fatalf("check(%q): %v", b, err)
		}
	})
}
