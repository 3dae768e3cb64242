package worker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// maxJSONDepth bounds the nesting of every JSON document the worker or its host parses.
const maxJSONDepth = 64

// decodeStrict parses b, at most limit bytes, into v with exactly one reading: valid UTF-8
// (encoding/json would silently replace bad bytes), no duplicate object keys (it would keep
// the last), no unknown struct fields, no trailing data, bounded nesting.
func decodeStrict(what string, b []byte, limit int, v any) error {
	if len(b) > limit {
		return fmt.Errorf("read %s: %d bytes, over the %d byte limit", what, len(b), limit)
	}
	if !utf8.Valid(b) {
		return fmt.Errorf("read %s: not valid UTF-8", what)
	}
	if err := checkJSON(b); err != nil {
		return fmt.Errorf("read %s: %w", what, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("read %s: %w", what, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("read %s: data after the JSON document", what)
	}
	return nil
}

// checkJSON walks one JSON document and refuses duplicate keys and deep nesting.
func checkJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := walkValue(dec, 0); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the JSON document")
	}
	return nil
}

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
	switch d {
	case '{':
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
			if seen[k] {
				return fmt.Errorf("duplicate key %q", k)
			}
			seen[k] = true
			if err := walkValue(dec, depth+1); err != nil {
				return err
			}
		}
	case '[':
		for dec.More() {
			if err := walkValue(dec, depth+1); err != nil {
				return err
			}
		}
	}
	_, err = dec.Token() // the closing delimiter
	return err
}
