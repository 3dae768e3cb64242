package orch

import (
	"encoding/json"
	"testing"

	"github.com/agora-dev/agora/internal/jcs"
)

// TestItemInput: the spliced input of an item's task is exactly RFC 8785 of the template's
// input with the item set, whatever keys order around "item" (UTF-16 order: "\U0001F600"
// sorts before "\uFFFD", unlike in UTF-8).
func TestItemInput(t *testing.T) {
	for _, tmpl := range []string{``, `{}`, `{"a":1}`, `{"z":[1,{"b":2}]}`, `{"Item":1,"ite":2,"itema":3,"items":null}`,
		"{\"\u00e9\":\"x\",\"\ufffd\":1,\"\U0001F600\":2,\"a\":\"\u2028\"}", `{"a\"b":{"item":1}}`} {
		for _, item := range []string{`1`, `"s"`, `{"id":"k","n":[true,null]}`, `[]`} {
			var in json.RawMessage
			m := map[string]any{}
			if tmpl != "" {
				var x map[string]any
				if err := json.Unmarshal([]byte(tmpl), &x); err != nil {
					t.Fatal(err)
				}
				c, err := jcs.Marshal(x)
				if err != nil {
					t.Fatal(err)
				}
				in = c
				m = x
			}
			var v any
			json.Unmarshal([]byte(item), &v)
			m["item"] = v
			want, err := jcs.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			ib, err := newItemInput(in)
			if err != nil {
				t.Fatal(err)
			}
			if got := ib.with([]byte(item)); string(got) != string(want) {
				t.Errorf("template %s, item %s:\n got %s\nwant %s", tmpl, item, got, want)
			}
		}
	}
}
