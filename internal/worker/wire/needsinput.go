package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agora-dev/agora/internal/strictjson"
)

// NeedsInput is the agent's question, from out/needs_input.json:
// {"question": string, "options": [string], "partial_state": any JSON}.
type NeedsInput struct {
	// Question is required, at most [MaxQuestion] bytes.
	Question string `json:"question"`
	// Options are suggested answers: at most [MaxOptions], each at most [MaxOption] bytes.
	Options []string `json:"options,omitempty"`
	// PartialState is opaque JSON the resumed dispatch gets back, at most
	// [MaxPartialState] bytes in its compact encoding.
	PartialState json.RawMessage `json:"partial_state,omitempty"`
}

// Limits of needs_input.json.
const (
	MaxQuestion     = 8 << 10
	MaxOptions      = 20
	MaxOption       = 1 << 10
	MaxPartialState = 1 << 20
	// MaxNeedsInputFile caps the file: the parts above plus room for JSON escaping.
	MaxNeedsInputFile = 2*MaxPartialState + 16*(MaxQuestion+MaxOptions*MaxOption)
)

// ParseNeedsInput reads an agent's needs_input.json strictly and returns it with
// PartialState in compact form.
func ParseNeedsInput(b []byte) (NeedsInput, error) {
	var n NeedsInput
	if err := strictjson.Decode("needs_input.json", b, MaxNeedsInputFile, &n); err != nil {
		return NeedsInput{}, err
	}
	if len(n.PartialState) > 0 {
		var c bytes.Buffer
		if err := json.Compact(&c, n.PartialState); err != nil {
			return NeedsInput{}, fmt.Errorf("read needs_input.json: partial_state: %w", err)
		}
		n.PartialState = c.Bytes()
		if string(n.PartialState) == "null" {
			n.PartialState = nil
		}
	}
	if err := n.Validate(); err != nil {
		return NeedsInput{}, fmt.Errorf("read needs_input.json: %w", err)
	}
	return n, nil
}

// Validate checks the limits of n.
func (n NeedsInput) Validate() error {
	switch {
	case strings.TrimSpace(n.Question) == "":
		return errors.New("question is required")
	case len(n.Question) > MaxQuestion:
		return fmt.Errorf("question is %d bytes, over the %d byte limit", len(n.Question), MaxQuestion)
	case len(n.Options) > MaxOptions:
		return fmt.Errorf("%d options, over the limit of %d", len(n.Options), MaxOptions)
	case len(n.PartialState) > MaxPartialState:
		return fmt.Errorf("partial_state is %d bytes, over the %d byte limit", len(n.PartialState), MaxPartialState)
	case len(n.PartialState) > 0 && !json.Valid(n.PartialState):
		return errors.New("partial_state is not valid JSON")
	}
	for i, o := range n.Options {
		if len(o) > MaxOption {
			return fmt.Errorf("options[%d] is %d bytes, over the %d byte limit", i, len(o), MaxOption)
		}
	}
	return nil
}
