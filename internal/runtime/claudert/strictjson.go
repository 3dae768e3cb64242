package claudert

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxJSONDepth bounds the nesting of one event.
const maxJSONDepth = 64

// checkObject makes sure b is exactly one JSON object with one reading: valid UTF-8
// (encoding/json would silently replace bad bytes), no two keys of an object equal under
// case folding (encoding/json matches field names case-insensitively and keeps the last),
// bounded nesting, nothing after it.
func checkObject(b []byte) error {
	if !utf8.Valid(b) {
		return errors.New("not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return errors.New("not a JSON object")
	}
	if err := walkObject(dec, 1); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the JSON object")
	}
	return nil
}

// walkObject reads the members of an object whose '{' was just read, and its '}'.
func walkObject(dec *json.Decoder, depth int) error {
	seen := map[string]bool{}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return err
		}
		k, ok := kt.(string)
		if !ok {
			return errors.New("object key is not a string")
		}
		fold := foldKey(k)
		if seen[fold] {
			return fmt.Errorf("duplicate key %q", k)
		}
		seen[fold] = true
		if err := walkValue(dec, depth); err != nil {
			return err
		}
	}
	_, err := dec.Token() // '}'
	return err
}

// walkValue reads one value at nesting depth.
func walkValue(dec *json.Decoder, depth int) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	if depth >= maxJSONDepth {
		return fmt.Errorf("nested deeper than %d levels", maxJSONDepth)
	}
	if d == '{' {
		return walkObject(dec, depth+1)
	}
	for dec.More() { // '['
		if err := walkValue(dec, depth+1); err != nil {
			return err
		}
	}
	_, err = dec.Token() // ']'
	return err
}

// foldKey maps every rune of k to the smallest member of its simple case-folding orbit, so
// keys encoding/json would match to the same field ("Type", "TYPE", "\u212Aind" and "kind")
// map to the same string.
func foldKey(k string) string {
	var b strings.Builder
	for _, r := range k {
		m := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			m = min(m, f)
		}
		b.WriteRune(m)
	}
	return b.String()
}

// object is one JSON object's members by their exact names. encoding/json matches struct
// fields case-insensitively, so events are read through object instead: "tYpe" is not "type".
type object map[string]json.RawMessage

// decodeObject decodes a JSON object (null is not one).
func decodeObject(b []byte) (object, error) {
	var o object
	if err := json.Unmarshal(b, &o); err != nil {
		return nil, err
	}
	if o == nil {
		return nil, errors.New("not a JSON object")
	}
	return o, nil
}

// field decodes member key into dst, which MUST be a string, bool, number, object,
// json.RawMessage or a slice of those (never a struct). It reports whether the member is
// present and not null.
func (o object) field(key string, dst any) (bool, error) {
	raw, ok := o[key]
	if !ok || string(raw) == "null" {
		return false, nil
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return true, fmt.Errorf("field %s: %w", key, err)
	}
	return true, nil
}
