package mcpserver

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
)

// TestRedTeam47M_DecoderNeverWiderThanSchema: with the SDK server holding only
// the bare schema, the decoder is the one check. For every tool, every argument is given
// each of a set of awkward values ("", zero, bounds and one past, wrong types, empty and
// nested containers) beside each valid base call of the tool (resume's included), and
// whatever the decoder accepts must validate against the tool's published schema.
func TestRedTeam47M_DecoderNeverWiderThanSchema(t *testing.T) {
	const id = `"01ARZ3NDEKTSV4RRFFQ69G5FAV"`
	values := []string{`""`, `" "`, `"a"`, `"A"`, `"0"`, `"-"`, `"main"`, `"local"`, `"run-1"`, `"nightly"`, id,
		`"` + strings.Repeat("a", 64) + `"`, `"` + strings.Repeat("a", 97) + `"`,
		`0`, `-0`, `1`, `-1`, `30`, `300`, `301`, `86400`, `86401`, `1.0`, `1e2`,
		`true`, `false`, `[]`, `[""]`, `["a"]`, `["a","a"]`, `{}`, `{"a":1}`, `{"a":1.5}`,
		`{"dispatch":` + id + `,"answer":"x"}`, `{"dispatch":` + id + `,"answer":""}`, `{"dispatch":` + id + `}`}
	bases := map[string][]string{
		"agora_dispatch": {`{}`, `{"subagent":"w"}`, `{"resume":{"dispatch":` + id + `,"answer":"x"}}`,
			`{"subagent":"w","workspace":"app"}`},
		"agora_dispatch_describe":          {`{"id":` + id + `}`},
		"agora_dispatch_cancel":            {`{"id":` + id + `}`},
		"agora_orchestrator_submit":        {`{"plan":{}}`},
		"agora_orchestrator_status":        {`{"run_id":"r"}`},
		"agora_orchestrator_watch":         {`{"run_id":"r"}`},
		"agora_orchestrator_schedule_show": {`{"name":"n"}`},
	}
	tried, accepted := 0, 0
	for _, tl := range tools() {
		var schema struct{ Properties map[string]json.RawMessage }
		if err := json.Unmarshal(tl.schema, &schema); err != nil {
			t.Fatal(err)
		}
		fields := slices.Sorted(maps.Keys(schema.Properties))
		for _, base := range append([]string{`{}`}, bases[tl.name]...) {
			var b map[string]json.RawMessage
			if err := json.Unmarshal([]byte(base), &b); err != nil {
				t.Fatal(err)
			}
			for _, f := range append(fields, "extra") {
				for _, v := range values {
					m := maps.Clone(b)
					m[f] = json.RawMessage(v)
					raw, _ := json.Marshal(m)
					tried++
					if _, err := tl.decode(raw); err != nil {
						continue
					}
					accepted++
					var inst any
					if err := json.Unmarshal(raw, &inst); err != nil {
						t.Fatal(err)
					}
					if tl.name == "agora_orchestrator_submit" {
						continue // the plan is judged by the service (FuzzToolArguments says why)
					}
					if err := tl.resolved.Validate(&inst); err != nil {
						t.Errorf("%s accepted %s, which its published schema refuses: %v", tl.name, raw, err)
					}
				}
			}
		}
	}
	if accepted == 0 || accepted == tried {
		t.Fatalf("accepted %d of %d: the grid tests nothing", accepted, tried)
	}
}
