package dispatch_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// TestAccept_InputLimit: an input one byte over wire.MaxInputJSON of canonical JSON is a
// RequestError and leaves no record; exactly at the limit is accepted. Whitespace does not
// count, so a padded input under the limit in canonical form is accepted too.
func TestAccept_InputLimit(t *testing.T) {
	e := newEnv(t)
	e.subagent("noop", "true")
	sized := func(n int) json.RawMessage {
		return json.RawMessage(`{"x":"` + strings.Repeat("y", n-len(`{"x":""}`)) + `"}`)
	}
	_, err := e.d.Accept(t.Context(), dispatch.Request{Subagent: "noop", Input: sized(wire.MaxInputJSON + 1), Actor: "test"})
	var re *dispatch.RequestError
	if !errors.As(err, &re) || !errors.Is(err, wire.ErrInputTooLarge) {
		t.Fatalf("one byte over: got %v, want a RequestError matching wire.ErrInputTooLarge", err)
	}
	recs, err := e.d.Records.List(t.Context(), dispatch.ListFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 0 {
		t.Fatalf("a refused input left %d records", len(recs))
	}
	for _, in := range []json.RawMessage{sized(wire.MaxInputJSON), json.RawMessage(`{"a" :` + strings.Repeat(" ", wire.MaxInputJSON) + `1}`)} {
		r, err := e.d.Accept(t.Context(), dispatch.Request{Subagent: "noop", Input: in, Actor: "test"})
		if err != nil {
			t.Fatalf("input of %d bytes: %v", len(in), err)
		}
		if r.State != lifecycle.DispatchAccepted {
			t.Errorf("state %s, want accepted", r.State)
		}
	}
}
