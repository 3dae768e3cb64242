package strictjson_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/strictjson"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		name, in, err string
	}{
		{"object", `{"a": 1, "b": [1, {"c": null}]}`, ""},
		{"scalar", `"x"`, ""},
		{"duplicate key", `{"a": 1, "a": 2}`, `duplicate key "a"`},
		{"keys equal under case folding", `{"state": "ok", "State": "failed"}`, `duplicate key "State"`},
		{"kelvin sign folds to k", `{"kind": 1, "\u212Aind": 2}`, "duplicate key"},
		{"nested duplicate", `{"a": {"b": 1, "B": 2}}`, "duplicate key"},
		{"same key in sibling objects", `[{"a": 1}, {"a": 2}]`, ""},
		{"invalid UTF-8", "{\"a\": \"\xff\"}", "not valid UTF-8"},
		{"trailing data", `{} {}`, "data after the JSON document"},
		{"too deep", strings.Repeat("[", strictjson.MaxDepth+1) + strings.Repeat("]", strictjson.MaxDepth+1), "nested deeper"},
		{"deep enough", strings.Repeat("[", strictjson.MaxDepth) + strings.Repeat("]", strictjson.MaxDepth), ""},
		{"broken", `{"a": }`, "invalid character"},
		{"number beyond float64", `{"n": 2` + strings.Repeat("0", 400) + `}`, "number 200000000000000000000000... is out of range"},
		{"exponent beyond float64", `[-1e309]`, "number -1e309 is out of range"},
		{"tiny number rounds to zero", `[1e-400]`, ""},
		{"large but finite", `[1.7976931348623157e308]`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := strictjson.Check([]byte(tt.in))
			if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
				t.Errorf("Check(%q) = %v, want %q", tt.in, err, tt.err)
			}
		})
	}
}

func TestCheckObject(t *testing.T) {
	if err := strictjson.CheckObject([]byte(`{"a": 1}`)); err != nil {
		t.Errorf("object refused: %v", err)
	}
	for _, in := range []string{`[1]`, `"x"`, `null`} {
		if err := strictjson.CheckObject([]byte(in)); err == nil {
			t.Errorf("CheckObject(%s) accepted a non-object", in)
		}
	}
}

func TestDecode(t *testing.T) {
	var v struct {
		State string `json:"state"`
	}
	if err := strictjson.Decode("result", []byte(`{"state": "ok"}`), 100, &v); err != nil || v.State != "ok" {
		t.Fatalf("Decode = %v, %+v", err, v)
	}
	for in, want := range map[string]string{
		`{"state": "ok", "extra": 1}`:                   `read result: json: unknown field "extra"`,
		`{"state": "ok", "STATE": "bad"}`:               `read result: duplicate key "STATE"`,
		`{"state": "` + strings.Repeat("x", 100) + `"}`: "read result: 113 bytes, over the 100 byte limit",
	} {
		if err := strictjson.Decode("result", []byte(in), 100, &v); err == nil || err.Error() != want {
			t.Errorf("Decode(%.30s) = %v, want %q", in, err, want)
		}
	}
}

// FuzzCheck: Check never panics, and whatever it accepts encoding/json decodes too.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a":1,"A":2}`, `[[[]]]`, `{"\u212A":1,"k":2}`, "\"\xff\"", "2" + strings.Repeat("0", 400), "1e309", "-1e-400"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if strictjson.Check(b) != nil {
			return
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("Check accepted what encoding/json refuses: %v", err)
		}
	})
}
