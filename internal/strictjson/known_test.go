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

// rawDoc is what Fields.Members is checked against: UnmarshalKnown into a struct whose fields
// read themselves.
type rawDoc struct {
	Iss json.RawMessage `json:"iss"`
	Sub json.RawMessage `json:"sub"`
	Exp json.RawMessage `json:"exp"`
}

var rawFields = strictjson.NewFields("iss", "sub", "exp")

func TestFieldsMembers(t *testing.T) {
	tests := []struct {
		name, in, err string
		keys          []string
	}{
		{"members in order, values as written", `{ "sub" : "u" , "x":{"a":[1, 2]},"iss":null,"exp":1e3 }`, "", []string{"sub", "x", "iss", "exp"}},
		{"empty object", ` {} `, "", nil},
		{"escaped key is unescaped", `{"\u0073ub":"u"}`, "", []string{"sub"}},
		{"case variant of a name", `{"Sub":"u"}`, `unknown field "Sub" (keys are case-sensitive: the field is "sub")`, nil},
		{"long s folds to s", `{"\u017Fub":"u"}`, `the field is "sub"`, nil},
		{"duplicate", `{"sub":"u","sub":"v"}`, `duplicate key "sub"`, nil},
		{"case-folded duplicate of an unknown key", `{"seq":1,"SEQ":2}`, `duplicate key "SEQ"`, nil},
		{"nested duplicate", `{"x":{"a":1,"A":2}}`, `duplicate key "A" at .x`, nil},
		{"number out of range", `{"exp":1e400}`, "out of range", nil},
		{"not an object", `["sub"]`, "not a JSON object", nil},
		{"null", `null`, "not a JSON object", nil},
		{"not JSON", `{"sub":`, "unexpected EOF", nil},
		{"invalid UTF-8", "{\"sub\":\"\xff\"}", "UTF-8", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms, err := rawFields.Members([]byte(tt.in), nil)
			if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
				t.Fatalf("Members(%s) = %v, want %q", tt.in, err, tt.err)
			}
			if err != nil {
				return
			}
			var keys []string
			for _, m := range ms {
				keys = append(keys, m.Key)
			}
			if !reflect.DeepEqual(keys, tt.keys) {
				t.Fatalf("keys %q, want %q", keys, tt.keys)
			}
		})
	}
	ms, err := rawFields.Members([]byte(`{ "sub" : "u" , "x":{"a":[1, 2]},"iss":null,"exp":1e3 }`), make([]strictjson.Member, 0, 4))
	want := []string{`"u"`, `{"a":[1, 2]}`, `null`, `1e3`}
	if err != nil || len(ms) != len(want) {
		t.Fatalf("Members = %v, %v", ms, err)
	}
	for i, m := range ms {
		if string(m.Value) != want[i] {
			t.Errorf("member %q holds %q, want %q", m.Key, m.Value, want[i])
		}
	}
}

// FuzzFieldsMembers_MatchesUnmarshalKnown: Members accepts exactly the objects UnmarshalKnown
// accepts into a struct of raw fields, and each field's member holds what encoding/json put in
// the field.
func FuzzFieldsMembers_MatchesUnmarshalKnown(f *testing.F) {
	for _, s := range []string{`{"iss":"a","sub":"b","exp":1,"x":[{"y":null}]}`, `{"Sub":1}`, `{"sub":1,"SUB":2}`,
		`{"\u0073ub":"u"}`, `null`, `[1]`, `{"exp":1e999}`, ` { "iss" : [ 1 , "x" ] } `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ms, err := rawFields.Members(b, nil)
		var v rawDoc
		errKnown := strictjson.UnmarshalKnown(b, &v)
		if err != nil {
			var top map[string]json.RawMessage
			if errKnown == nil && json.Unmarshal(b, &top) == nil && top != nil {
				t.Fatalf("Members refused an object UnmarshalKnown accepts: %v", err)
			}
			return
		}
		if errKnown != nil {
			t.Fatalf("Members accepted what UnmarshalKnown refuses: %v", errKnown)
		}
		got := map[string][]byte{}
		for _, m := range ms {
			got[m.Key] = m.Value
		}
		for name, field := range map[string]json.RawMessage{"iss": v.Iss, "sub": v.Sub, "exp": v.Exp} {
			if string(got[name]) != string(field) {
				t.Fatalf("%s: Members %q, UnmarshalKnown %q", name, got[name], field)
			}
		}
	})
}
