package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/agora-dev/agora/internal/jcs"
)

// maxRawInput bounds the bytes [CanonicalInput] parses at all. The limit that counts is
// [MaxInputJSON] of canonical JSON; this only keeps a caller from making the host parse
// megabytes of whitespace to find that out.
const maxRawInput = 1 << 20

// ErrInputTooLarge is an input whose canonical JSON is over [MaxInputJSON] bytes.
var ErrInputTooLarge = errors.New("input too large")

// CanonicalInput checks that raw is one JSON object whose RFC 8785 form (as package jcs writes
// it) is at most [MaxInputJSON] bytes, and returns that form; empty raw is {}. It is the one
// check every way in (the CLI, MCP, plans, resume) applies before a dispatch is recorded: the
// input reaches the agent as one environment string, so a larger one could be recorded but
// never run. An input over the limit is an error matching [ErrInputTooLarge].
func CanonicalInput(raw []byte) ([]byte, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return []byte("{}"), nil
	}
	if len(raw) > maxRawInput {
		return nil, fmt.Errorf("%w: %d bytes; the limit is %d bytes of canonical JSON (RFC 8785)", ErrInputTooLarge, len(raw), MaxInputJSON)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("input is not valid JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("input holds more than one JSON value")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("input must be a JSON object")
	}
	b, err := jcs.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("input: %v", err)
	}
	if len(b) > MaxInputJSON {
		return nil, fmt.Errorf("%w: %d bytes of canonical JSON (RFC 8785); the limit is %d", ErrInputTooLarge, len(b), MaxInputJSON)
	}
	return b, nil
}
