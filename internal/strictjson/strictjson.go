// Package strictjson reads JSON that must have exactly one meaning: documents the worker,
// the host and the runtimes exchange across the sandbox boundary (manifest.json, result.json,
// the secrets object, Claude Code's stream-json events). encoding/json alone silently replaces
// invalid UTF-8, keeps the last of two duplicate keys, and matches object keys to struct fields
// case-insensitively, so "state" and "State" in one object would let a writer say two things.
//
// It is pure (no I/O, no agora imports) and runs on both sides of the sandbox.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxDepth bounds the nesting of a document.
const MaxDepth = 64

// Check makes sure b is one JSON document with one reading: valid UTF-8, no two keys of an
// object equal under case folding, no number beyond float64's range, at most MaxDepth levels
// deep, nothing after it.
func Check(b []byte) error {
	_, err := check(b)
	return err
}

// CheckObject is [Check] for a document that must be a JSON object.
func CheckObject(b []byte) error {
	first, err := check(b)
	if err != nil {
		return err
	}
	if first != '{' {
		return errors.New("not a JSON object")
	}
	return nil
}

// check returns the document's first delimiter ('{', '[') or 0 for a scalar.
func check(b []byte) (json.Delim, error) {
	if !utf8.Valid(b) {
		return 0, errors.New("not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	first, err := walkValue(dec, 0)
	if err != nil {
		return 0, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return 0, errors.New("data after the JSON document")
	}
	return first, nil
}

// Decode parses b, at most limit bytes, into v after [Check], refusing unknown struct fields.
// what names the document in errors ("read manifest: ...").
func Decode(what string, b []byte, limit int, v any) error {
	if len(b) > limit {
		return fmt.Errorf("read %s: %d bytes, over the %d byte limit", what, len(b), limit)
	}
	if err := Check(b); err != nil {
		return fmt.Errorf("read %s: %w", what, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("read %s: %w", what, err)
	}
	return nil
}

// walkValue reads one value at nesting depth and returns its opening delimiter, if any.
func walkValue(dec *json.Decoder, depth int) (json.Delim, error) {
	tok, err := dec.Token()
	if err != nil {
		return 0, err
	}
	if n, ok := tok.(json.Number); ok {
		return 0, checkNumber(n)
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return 0, nil
	}
	if depth >= MaxDepth {
		return 0, fmt.Errorf("nested deeper than %d levels", MaxDepth)
	}
	seen := map[string]bool{}
	for dec.More() {
		if d == '{' {
			kt, err := dec.Token()
			if err != nil {
				return 0, err
			}
			k, ok := kt.(string)
			if !ok {
				return 0, errors.New("object key is not a string")
			}
			fold := foldKey(k)
			if seen[fold] {
				return 0, fmt.Errorf("duplicate key %q", k)
			}
			seen[fold] = true
		}
		if _, err := walkValue(dec, depth+1); err != nil {
			return 0, err
		}
	}
	_, err = dec.Token() // the closing delimiter
	return d, err
}

// checkNumber refuses a number no float64 holds: readers disagree on what it means (one
// rounds to infinity, one refuses, one keeps it exact), so it has no one reading.
func checkNumber(n json.Number) error {
	if _, err := strconv.ParseFloat(string(n), 64); err != nil {
		s := string(n)
		if len(s) > 24 {
			s = s[:24] + "..."
		}
		return fmt.Errorf("number %s is out of range", s)
	}
	return nil
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
