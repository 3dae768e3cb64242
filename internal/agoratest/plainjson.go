package agoratest

import (
	"encoding/json"
	"testing"
)

// PlainJSON is v as JSON decodes it into plain values (maps, slices, strings, float64s): two
// values compare equal as their JSON does, whatever their fields' order or Go types.
func PlainJSON(tb testing.TB, v any) any {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		tb.Fatal(err)
	}
	return out
}
