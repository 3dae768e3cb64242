package strictjson_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

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
		`{"state": "ok", "extra": 1}`:                   `read result: unknown field "extra"`,
		`{"State": "ok"}`:                               `read result: unknown field "State" (keys are case-sensitive: the field is "state")`,
		`{"state": "ok", "STATE": "bad"}`:               `read result: duplicate key "STATE"`,
		`{"state": "` + strings.Repeat("x", 100) + `"}`: "read result: 113 bytes, over the 100 byte limit",
	} {
		if err := strictjson.Decode("result", []byte(in), 100, &v); err == nil || err.Error() != want {
			t.Errorf("Decode(%.30s) = %v, want %q", in, err, want)
		}
	}
}

// unmarshalDoc has every kind of field Unmarshal treats differently.
type unmarshalDoc struct {
	State   string            `json:"state"`
	Kind    string            `json:"kind"`
	Count   int               // no tag: the Go name is the key
	Items   []unmarshalItem   `json:"items"`
	ByName  map[string]string `json:"by_name"`
	Any     any               `json:"any"`
	Raw     json.RawMessage   `json:"raw"`
	At      time.Time         `json:"at"`
	Next    *unmarshalDoc     `json:"next"`
	Skipped string            `json:"-"`
	hidden  string
	unmarshalEmbedded
}

type unmarshalItem struct {
	Path string `json:"path"`
}

type unmarshalEmbedded struct {
	Promoted string `json:"promoted"`
	State    string `json:"state"` // hidden by the outer state
}

func TestUnmarshal(t *testing.T) {
	tests := []struct {
		name, in, err string
	}{
		{"exact names", `{"state":"ok","Count":1,"items":[{"path":"a"}],"promoted":"p","at":"2026-01-02T03:04:05Z"}`, ""},
		{"lone case variant", `{"State":"ok"}`, `unknown field "State" (keys are case-sensitive: the field is "state")`},
		{"case variant of a Go name", `{"count":1}`, `unknown field "count" (keys are case-sensitive: the field is "Count")`},
		{"kelvin sign", `{"kind":"a","\u212Aind":"b"}`, `duplicate key "Kind"`},
		{"lone kelvin sign", `{"by_name":{},"next":{"\u212Aind":"b"}}`, `unknown field "Kind" (keys are case-sensitive: the field is "kind") at .next`},
		{"nested in a list", `{"items":[{"path":"a"},{"Path":"b"}]}`, `unknown field "Path" (keys are case-sensitive: the field is "path") at .items[1]`},
		{"promoted field variant", `{"Promoted":"p"}`, `the field is "promoted"`},
		{"unknown", `{"extra":1}`, `unknown field "extra"`},
		{"dash tag", `{"Skipped":"x"}`, `unknown field "Skipped"`},
		{"unexported", `{"hidden":"x"}`, `unknown field "hidden"`},
		{"map keys are data", `{"by_name":{"State":"a","state2":"b"}}`, ""},
		{"map keys still fold-unique", `{"by_name":{"State":"a","state":"b"}}`, `duplicate key "state" at .by_name`},
		{"interface keeps keys", `{"any":{"State":{"X":1}}}`, ""},
		{"raw message keeps keys", `{"raw":{"State":1}}`, ""},
		{"recursive type", `{"next":{"next":{"items":[{"PATH":"x"}]}}}`, `at .next.next.items[0]`},
		{"long key clipped", `{"` + strings.Repeat("k", 200) + `":1}`, `unknown field "` + strings.Repeat("k", 80) + `..."`},
		{"wrong type still refused", `{"state":1}`, "cannot unmarshal number"},
		{"trailing data", `{} {}`, "data after the JSON document"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v unmarshalDoc
			err := strictjson.Unmarshal([]byte(tt.in), &v)
			if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
				t.Errorf("Unmarshal(%.60s) = %v, want %q", tt.in, err, tt.err)
			}
		})
	}
	if err := strictjson.Unmarshal([]byte(`{}`), unmarshalDoc{}); err == nil {
		t.Error("Unmarshal into a non-pointer succeeded")
	}
}

// FuzzUnmarshal: Unmarshal never panics, and a document it accepts means the same to a
// case-sensitive reader: every key of a struct-typed object is a field's exact name, and
// encoding/json reads the same value.
func FuzzUnmarshal(f *testing.F) {
	for _, s := range []string{`{"state":"ok","items":[{"path":"a"}]}`, `{"State":"ok"}`, `{"items":[{"PATH":"x"}]}`,
		`{"\u212Aind":"x"}`, `{"by_name":{"Any":"1"}}`, `{"next":{"next":{"state":"x"}}}`, `{"promoted":"p","Promoted":"q"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var v unmarshalDoc
		if strictjson.Unmarshal(b, &v) != nil {
			return
		}
		var w unmarshalDoc
		if err := json.Unmarshal(b, &w); err != nil || !reflect.DeepEqual(v, w) {
			t.Fatalf("encoding/json reads it otherwise: %v", err)
		}
		var generic any
		if err := json.Unmarshal(b, &generic); err != nil {
			t.Fatal(err)
		}
		checkExactKeys(t, generic, reflect.TypeFor[unmarshalDoc]())
	})
}

// checkExactKeys fails t if an object read into a struct of type typ has a key that is not
// exactly one of the fields' JSON names.
func checkExactKeys(t *testing.T, v any, typ reflect.Type) {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	switch x := v.(type) {
	case map[string]any:
		if typ.Kind() != reflect.Struct || typ == reflect.TypeFor[time.Time]() {
			return
		}
		names := map[string]reflect.Type{"promoted": reflect.TypeFor[string]()}
		for i := range typ.NumField() {
			sf := typ.Field(i)
			name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
			if name == "" {
				name = sf.Name
			}
			if sf.IsExported() && !sf.Anonymous && name != "-" {
				names[name] = sf.Type
			}
		}
		for k, val := range x {
			ft, ok := names[k]
			if !ok {
				t.Fatalf("key %q is not a field of %s", k, typ)
			}
			checkExactKeys(t, val, ft)
		}
	case []any:
		if typ.Kind() == reflect.Slice {
			for _, e := range x {
				checkExactKeys(t, e, typ.Elem())
			}
		}
	}
}

// FuzzCheck: Check never panics, and whatever it accepts encoding/json decodes too.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a":1,"A":2}`, `[[[]]]`, `{"\u212A":1,"k":2}`, `{"State":1}`, "\"\xff\"", "2" + strings.Repeat("0", 400), "1e309", "-1e-400"} {
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

// TestUnmarshal_BytesOneSpelling: a []byte field takes only canonical base64 (padded
// standard alphabet, zero padding bits, no line breaks, no JSON escape): encoding/json alone
// takes every spelling below as the same bytes, so a signed document's bytes could change
// under an unchanged meaning.
func TestUnmarshal_BytesOneSpelling(t *testing.T) {
	type doc struct {
		B  []byte   `json:"b"`
		BS [][]byte `json:"bs"`
	}
	var d doc
	if err := strictjson.Unmarshal([]byte(`{"b":"QUJD","bs":["QQ==","/w=="]}`), &d); err != nil || string(d.B) != "ABC" {
		t.Fatalf("canonical base64: %v %q", err, d.B)
	}
	for _, bad := range []string{
		`{"b":"QR=="}`,      // nonzero padding bits
		`{"b":"QQ"}`,        // no padding
		`{"b":"QU\nJD"}`,    // an escaped line break
		`{"b":"QU\u004aD"}`, // an escaped letter
		`{"bs":["\/w=="]}`,  // an escaped slash
		`{"b":"QUJD\r\n"}`,  // a trailing line break
		`{"b":"QUJD","bs":["QR=="]}`,
	} {
		if err := strictjson.Unmarshal([]byte(bad), &d); err == nil || !strings.Contains(err.Error(), "byte string") {
			t.Errorf("%s: %v, want refused as not one spelling", bad, err)
		}
	}
}
