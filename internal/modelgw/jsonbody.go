package modelgw

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"unicode/utf8"

	"github.com/agora-dev/agora/internal/strictjson"
)

// maxFieldInError caps how much of an unknown field name an error repeats.
const maxFieldInError = 40

// decodeFlat parses b as exactly one flat JSON object into v, strictly: valid UTF-8, every
// key one of fields exactly (encoding/json alone would match keys case-insensitively and keep
// the last of duplicates), no key twice, only scalar values, nothing after the object; v is
// decoded by [strictjson.Unmarshal].
func decodeFlat(b []byte, fields []string, v any) error {
	if !utf8.Valid(b) {
		return errors.New("body is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return errors.New("body is not a JSON object")
	}
	seen := make(map[string]bool, len(fields))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("body is not valid JSON: %s", jsonErr(err))
		}
		key := tok.(string) // inside an object, Token yields keys as strings
		switch {
		case !slices.Contains(fields, key):
			return fmt.Errorf("unknown field %s", quoted(key, maxFieldInError))
		case seen[key]:
			return fmt.Errorf("field %q given twice", key)
		}
		seen[key] = true
		tok, err = dec.Token()
		if err != nil {
			return fmt.Errorf("body is not valid JSON: %s", jsonErr(err))
		}
		if _, ok := tok.(json.Delim); ok {
			return fmt.Errorf("field %q: want a string or a number", key)
		}
	}
	if _, err := dec.Token(); err != nil {
		return fmt.Errorf("body is not valid JSON: %s", jsonErr(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the JSON object")
	}
	// The pass above explains a refusal without repeating the body; strictjson decides and
	// decodes (no key that matches a field only under case folding, numbers in range).
	if err := strictjson.Unmarshal(b, v); err != nil {
		return fmt.Errorf("body does not match the schema: %s", jsonErr(err))
	}
	return nil
}

// jsonErr renders a decoding error without repeating the input.
func jsonErr(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("syntax error at byte %d", se.Offset)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("field %q: wrong type %s", clip(te.Field, maxFieldInError), te.Value)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "unexpected end of input"
	}
	return "invalid JSON"
}
