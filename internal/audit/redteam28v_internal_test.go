package audit

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/agora-dev/agora/internal/jcs"
)

// envelopeByMarshal is what encodeEntry wrote before 760d0fd: jcs.Marshal of the envelope map.
func envelopeByMarshal(seq int64, at string, e Entry) ([]byte, error) {
	details := e.Details
	if details == nil {
		details = map[string]any{}
	}
	return jcs.Marshal(map[string]any{
		"seq": seq, "time": at, "actor": e.Actor, "kind": e.Kind, "subject": e.Subject, "details": details,
	})
}

// An entry's bytes, now written by jcs.AppendObject, are the RFC 8785
// bytes jcs.Marshal writes for the same map, for hostile details a model or agent can put in a
// gateway or tool-call entry: non-ASCII keys on both sides of the UTF-16/code-point ordering
// split, keys equal up to case or normalization, envelope names nested as detail keys, control
// characters, numbers at the exact-range edge. Any input one refuses the other refuses too.
func TestRedTeam28V_EntryBytesAreMarshalOfTheMap(t *testing.T) {
	hostile := map[string]any{
		"\uffff": 1, "😀": 2, "\ue000": 3, "\U00010000": 4, "é": 5, "e\u0301": 6, "E": 7, "e": 8,
		"": "empty key", "\x00": "nul", "\u2028": "ls", "a\"b": `q"\`, "seq": "not the seq", "actor": "me",
		"nested": map[string]any{"\U0010ffff": []any{nil, true, int64(1 << 53), -(1 << 53), json.Number("-0")}, "\ud7ff": map[string]string{"z": "y", "Z": "y"}},
		"args":   []string{"\x1f", "\u007f", "\ufeff"},
	}
	cases := []Entry{
		{Actor: "agent:x", Kind: "gateway.call", Subject: "task/1", Details: hostile},
		{Actor: "😀", Kind: "\ue000", Subject: "\U00010000", Details: nil},
		{Actor: "", Kind: "", Subject: "", Details: map[string]any{}},
		{Actor: "a", Kind: "k", Subject: "s", Details: map[string]any{"x": 1.5}},              // refused: not integral
		{Actor: "\xff", Kind: "k", Subject: "s", Details: map[string]any{}},                   // refused: invalid UTF-8
		{Actor: "a", Kind: "k", Subject: "s", Details: map[string]any{"\xfe": 1, "\xff": 2}},  // refused: invalid key
		{Actor: "a", Kind: "k", Subject: "s", Details: map[string]any{"n": int64(1<<53 + 1)}}, // refused: out of range
		{Actor: "a", Kind: "k", Subject: "s", Details: map[string]any{"f": struct{}{}}},       // refused: type
	}
	for i, e := range cases {
		for _, seq := range []int64{0, 1, 1 << 40} {
			got, gerr := encodeEntry(seq, "2026-11-24T03:20:00.000000001Z", e)
			want, werr := envelopeByMarshal(seq, "2026-11-24T03:20:00.000000001Z", e)
			if (gerr == nil) != (werr == nil) {
				t.Fatalf("case %d: encodeEntry err %v, jcs.Marshal err %v", i, gerr, werr)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("case %d: encodeEntry = %s\njcs.Marshal = %s", i, got, want)
			}
		}
	}
}

// FuzzRedTeam28VEncodeEntry compares encodeEntry with jcs.Marshal of the envelope map for any
// actor, kind, subject and a details map of two fuzzed keys and a fuzzed string value.
func FuzzRedTeam28VEncodeEntry(f *testing.F) {
	f.Add("agent", "gateway.call", "task/1", "\uffff", "😀", "v", int64(3))
	f.Add("\xff", "k", "s", "a", "b", "\x00", int64(1<<53+1))
	f.Add("a", "k", "s", "actor", "details", "seq", int64(-1))
	f.Fuzz(func(t *testing.T, actor, kind, subject, k1, k2, v string, seq int64) {
		e := Entry{Actor: actor, Kind: kind, Subject: subject, Details: map[string]any{k1: v, k2: []any{v, seq}}}
		got, gerr := encodeEntry(seq, v, e)
		want, werr := envelopeByMarshal(seq, v, e)
		if (gerr == nil) != (werr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("encodeEntry = %s, %v\njcs.Marshal = %s, %v", got, gerr, want, werr)
		}
	})
}
