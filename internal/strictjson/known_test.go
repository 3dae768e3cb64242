package strictjson_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/strictjson"
)

// knownDoc is read by UnmarshalKnown in the tests: a few fields of a larger document.
type knownDoc struct {
	Type string `json:"type"`
	Item *struct {
		Name string `json:"name"`
		Args string `json:"arguments"`
	} `json:"item"`
	List []struct {
		Name string `json:"name"`
	} `json:"list"`
}

func TestUnmarshalKnown(t *testing.T) {
	tests := []struct {
		name, in, err string
	}{
		{"unknown keys ignored at every level", `{"type":"a","seq":1,"item":{"name":"x","id":"i","extra":{"Name":1}},"list":[{"name":"y","z":2}]}`, ""},
		{"duplicate of a known key", `{"type":"a","type":"b"}`, `duplicate key "type"`},
		{"case-folded duplicate of a known key", `{"type":"a","Type":"b"}`, `duplicate key "Type"`},
		{"case-folded duplicate of an unknown key", `{"seq":1,"SEQ":2}`, `duplicate key "SEQ"`},
		{"lone case variant of a known key", `{"Type":"a"}`, `unknown field "Type" (keys are case-sensitive: the field is "type")`},
		{"nested case variant", `{"item":{"Name":"x"}}`, `the field is "name") at .item`},
		{"nested duplicate", `{"item":{"name":"exec_command","Name":"update_plan"}}`, `duplicate key "Name" at .item`},
		{"long s folds to s", `{"item":{"arguments":"x","argument\u017F":"y"}}`, "duplicate key"},
		{"lone long s", `{"item":{"argument\u017F":"y"}}`, `the field is "arguments"`},
		{"in a list", `{"list":[{"name":"a"},{"NAME":"b"}]}`, `at .list[1]`},
		{"escaped exact key is the key", `{"\u0074ype":"a"}`, ""},
		{"wrong type", `{"type":1}`, "cannot unmarshal number"},
		{"not JSON", `{"type":`, "unexpected EOF"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v knownDoc
			err := strictjson.UnmarshalKnown([]byte(tt.in), &v)
			if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
				t.Errorf("UnmarshalKnown(%.60s) = %v, want %q", tt.in, err, tt.err)
			}
		})
	}
	var v knownDoc
	if err := strictjson.UnmarshalKnown([]byte(`{"type":"t","item":{"name":"n","arguments":"{}"}}`), &v); err != nil || v.Type != "t" || v.Item.Name != "n" || v.Item.Args != "{}" {
		t.Errorf("UnmarshalKnown = %v, %+v", err, v)
	}
	if err := strictjson.UnmarshalKnown([]byte(`{}`), knownDoc{}); err == nil {
		t.Error("UnmarshalKnown into a non-pointer succeeded")
	}
}

// FuzzUnmarshalKnown: UnmarshalKnown never panics, and a document it accepts means the same
// to a case-sensitive reader: each field of knownDoc holds what the exact key holds (or its
// zero value when the key is absent), and no object holds two keys equal under case folding.
func FuzzUnmarshalKnown(f *testing.F) {
	for _, s := range []string{`{"type":"a","seq":1,"item":{"name":"x","arguments":"{}"}}`, `{"type":"a","Type":"b"}`,
		`{"Item":{}}`, `{"item":{"name":"a","NAME":"b"}}`, `{"list":[{"name":"a","x":1}]}`, `{"\u0074ype":"a"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var v knownDoc
		if strictjson.UnmarshalKnown(b, &v) != nil {
			return
		}
		var top map[string]any
		if json.Unmarshal(b, &top) != nil {
			return // a document that is not an object decodes into knownDoc only as null
		}
		str := func(m map[string]any, k string) string { s, _ := m[k].(string); return s }
		if got := str(top, "type"); got != v.Type {
			t.Fatalf("type: a case-sensitive reader sees %q, UnmarshalKnown %q", got, v.Type)
		}
		if item, ok := top["item"].(map[string]any); ok {
			if v.Item == nil || str(item, "name") != v.Item.Name || str(item, "arguments") != v.Item.Args {
				t.Fatalf("item: a case-sensitive reader sees %v, UnmarshalKnown %+v", item, v.Item)
			}
		} else if v.Item != nil && !reflect.ValueOf(*v.Item).IsZero() {
			t.Fatalf("item: absent for a case-sensitive reader, UnmarshalKnown read %+v", v.Item)
		}
		if list, ok := top["list"].([]any); ok {
			for i, e := range list {
				m, _ := e.(map[string]any)
				if i >= len(v.List) || str(m, "name") != v.List[i].Name {
					t.Fatalf("list[%d]: a case-sensitive reader sees %v, UnmarshalKnown %+v", i, e, v.List)
				}
			}
		}
	})
}
