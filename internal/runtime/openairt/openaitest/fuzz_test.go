package openaitest

import (
	"testing"
)

func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"a","content":"r"}],"tools":[{"type":"function","function":{"name":"f","parameters":{}}}],"tool_choice":"auto","stream":true,"stream_options":{"include_usage":true}}`,
		`{"model":"m","messages":[{"role":"tool","tool_call_id":"a","content":"r"}]}`,
		`{}`, `[]`, `null`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := decodeRequest(body)
		if err != nil {
			if err.Status != 400 || err.Message == "" {
				t.Fatalf("got refusal %+v", err)
			}
			return
		}
		// An accepted request is one the API would accept: a model, messages, and every
		// tool message answering a call of the assistant message just before it.
		if r.Model == "" || len(r.Messages) == 0 {
			t.Fatalf("accepted %s", body)
		}
		open := map[string]bool{}
		for i, m := range r.Messages {
			switch m.Role {
			case "tool":
				if !open[m.ToolCallID] {
					t.Fatalf("accepted tool message %d answering nothing: %s", i, body)
				}
				delete(open, m.ToolCallID)
			default:
				if len(open) > 0 {
					t.Fatalf("accepted unanswered calls before message %d: %s", i, body)
				}
				for _, tc := range m.ToolCalls {
					open[tc.ID] = true
				}
			}
		}
		if len(open) > 0 {
			t.Fatalf("accepted unanswered calls at the end: %s", body)
		}
	})
}
