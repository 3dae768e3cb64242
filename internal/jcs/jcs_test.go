package jcs_test

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/jcs"
)

func TestMarshal(t *testing.T) {
	tests := []struct {
		name string
		in   any
		want string
	}{
		{"null", nil, `null`},
		{"true", true, `true`},
		{"false", false, `false`},
		{"int", 42, `42`},
		{"negative int", -7, `-7`},
		{"int64 max exact", int64(1 << 53), `9007199254740992`},
		{"int64 min exact", int64(-(1 << 53)), `-9007199254740992`},
		{"uint64", uint64(1 << 53), `9007199254740992`},
		{"integral float", 4.0, `4`},
		{"large integral float", 1e15, `1000000000000000`},
		{"negative zero", math.Copysign(0, -1), `0`},
		{"empty string", "", `""`},
		{"empty list", []any{}, `[]`},
		{"empty string list", []string{}, `[]`},
		{"empty map", map[string]any{}, `{}`},
		{"literals", []any{nil, true, false}, `[null,true,false]`},
		{"nested", map[string]any{"b": []any{int64(1), map[string]string{"y": "2", "x": "1"}}, "a": nil},
			`{"a":null,"b":[1,{"x":"1","y":"2"}]}`},
		// RFC 8785 section 3.2.2.2: the string of the sample input.
		{"rfc 8785 string", "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"/", `"€$\u000f\nA'B\"\\\\\"/"`},
		{"control characters", "\x00\x01\x08\x09\x0a\x0b\x0c\x0d\x1f\x20\x7f",
			`"\u0000\u0001\b\t\n\u000b\f\r\u001f ` + "\x7f" + `"`},
		{"no HTML or line separator escaping", "<&>\u2028\u2029", "\"<&>\u2028\u2029\""},
		{"non-BMP kept as UTF-8", "😀", `"😀"`},
		// RFC 8785 section 3.2.3: keys sorted by UTF-16 code units, so U+1F600 (a surrogate
		// pair starting 0xD83D) sorts before U+FB33 although its code point is larger.
		{"rfc 8785 key order", map[string]any{
			"\u20ac":     "Euro Sign",
			"\r":         "Carriage Return",
			"\ufb33":     "Hebrew Letter Dalet With Dagesh",
			"1":          "One",
			"\U0001F600": "Emoji: Grinning Face",
			"\u0080":     "Control",
			"\u00f6":     "Latin Small Letter O With Diaeresis",
		}, "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"\u00f6\":\"Latin Small Letter O With Diaeresis\"," +
			"\"\u20ac\":\"Euro Sign\",\"\U0001F600\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}"},
		{"prefix sorts first", map[string]any{"ab": 1, "a": 2, "": 3}, `{"":3,"a":2,"ab":1}`},
		{"string map", map[string]string{"b": "1", "a": "2"}, `{"a":"2","b":"1"}`},
		{"audit shaped", map[string]any{
			"seq": int64(0), "time": "2026-01-02T03:04:05Z", "actor": "ci", "kind": "catalog.capability.register",
			"subject": "capability/x", "details": map[string]any{"size": int64(10), "patterns": []string{"jwt"}},
		}, `{"actor":"ci","details":{"patterns":["jwt"],"size":10},"kind":"catalog.capability.register","seq":0,"subject":"capability/x","time":"2026-01-02T03:04:05Z"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := jcs.Marshal(tt.in)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			if string(got) != tt.want {
				t.Errorf("Marshal = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestMarshal_Refuses(t *testing.T) {
	tests := []struct {
		name string
		in   any
		msg  string
	}{
		{"NaN", math.NaN(), "only integral numbers"},
		{"+Inf", math.Inf(1), "only integral numbers"},
		{"-Inf", math.Inf(-1), "only integral numbers"},
		{"fraction", 4.5, "only integral numbers"},
		{"rfc 8785 sample number", 333333333.33333329, "only integral numbers"},
		{"float beyond 2^53", 1e30, "only integral numbers"},
		{"int64 beyond 2^53", int64(1<<53 + 1), "outside the exact range"},
		{"int64 below -2^53", int64(-(1 << 53) - 1), "outside the exact range"},
		{"int beyond 2^53", int(1<<53 + 1), "outside the exact range"},
		{"uint64 beyond 2^53", uint64(math.MaxUint64), "outside the exact range"},
		{"int32", int32(1), "unsupported type int32"},
		{"float32", float32(1), "unsupported type float32"},
		{"struct", struct{}{}, "unsupported type struct {}"},
		{"map with int values", map[string]int{"a": 1}, "unsupported type map[string]int"},
		{"nested unsupported", map[string]any{"a": []any{1, []int{2}}}, "unsupported type []int"},
		{"pointer", new(string), "unsupported type *string"},
		{"invalid UTF-8", "a\xffb", "not valid UTF-8"},
		{"invalid UTF-8 key", map[string]any{"\xc3": 1}, "not valid UTF-8"},
		{"invalid UTF-8 in string list", []string{"ok", "\xed\xa0\x80"}, "not valid UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := jcs.Marshal(tt.in)
			if err == nil {
				t.Fatalf("Marshal(%#v) = %s, want an error", tt.in, got)
			}
			if !strings.Contains(err.Error(), tt.msg) || !strings.HasPrefix(err.Error(), "canonical json: ") {
				t.Errorf("Marshal error = %q, want it to start with \"canonical json: \" and contain %q", err, tt.msg)
			}
		})
	}
}

// TestMarshal_JSONNumber: numbers decoded with UseNumber follow the same rules as int64 and
// float64, so callers need not convert them first.
func TestMarshal_JSONNumber(t *testing.T) {
	for in, want := range map[string]string{
		`{"a":1,"b":-0,"c":2.0,"d":1e3,"e":9007199254740992}`: `{"a":1,"b":0,"c":2,"d":1000,"e":9007199254740992}`,
		`[1.5]`:              "error",
		`[9007199254740993]`: "error",
		`[1e400]`:            "error",
	} {
		dec := json.NewDecoder(strings.NewReader(in))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		got, err := jcs.Marshal(v)
		if want == "error" {
			if err == nil {
				t.Errorf("Marshal(%s) = %s, want an error", in, got)
			}
			continue
		}
		if err != nil || string(got) != want {
			t.Errorf("Marshal(%s) = %s, %v; want %s", in, got, err, want)
		}
	}
}

func TestMarshalObject(t *testing.T) {
	details := map[string]any{"attempt": int64(2), "z": []any{"x", nil, true}, "é": "€", "a\u0000b": "\n"}
	fields := []jcs.Field{{Key: "actor", Value: "orch"}, {Key: "details", Value: details}, {Key: "kind", Value: "orch.task.fired"},
		{Key: "seq", Value: int64(1 << 40)}, {Key: "subject", Value: "run/r/task/t"}, {Key: "time", Value: "2026-11-24T02:00:00Z"}}
	m := map[string]any{}
	for _, f := range fields {
		m[f.Key] = f.Value
	}
	want, err := jcs.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := jcs.MarshalObject(fields...)
	if err != nil || string(got) != string(want) {
		t.Errorf("MarshalObject = %s, %v; want %s", got, err, want)
	}
	// AppendObject writes the same bytes after what dst holds, leaving those as they were.
	prefix := []byte(`{"earlier":1}`)
	if got, err := jcs.AppendObject(prefix, fields...); err != nil || string(got) != string(prefix)+string(want) {
		t.Errorf("AppendObject = %s, %v; want %s%s", got, err, prefix, want)
	}
	if got, err := jcs.MarshalObject(); err != nil || string(got) != "{}" {
		t.Errorf("MarshalObject() = %s, %v; want {}", got, err)
	}
	for _, tc := range []struct {
		name   string
		fields []jcs.Field
	}{
		{"out of order", []jcs.Field{{Key: "kind", Value: 1}, {Key: "actor", Value: 2}}},
		{"a key twice", []jcs.Field{{Key: "a", Value: 1}, {Key: "a", Value: 2}}},
		{"byte order, not UTF-16 order", []jcs.Field{{Key: "\uffff", Value: 1}, {Key: "\U0001F600", Value: 2}}},
		{"a value Marshal refuses", []jcs.Field{{Key: "a", Value: 1.5}}},
		{"a key that is not UTF-8", []jcs.Field{{Key: "\xff", Value: 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, err := jcs.MarshalObject(tc.fields...); err == nil {
				t.Errorf("MarshalObject = %s, want an error", got)
			}
		})
	}
}
