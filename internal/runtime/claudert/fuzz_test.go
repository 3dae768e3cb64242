package claudert

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

func FuzzParseStream(f *testing.F) {
	for _, seed := range []string{
		lines(evInit, evText, evToolUse, evResult, evSubagent, evThinking, evStreamEvt, evSuccess),
		lines(evInit, evMaxTurns),
		lines(evText),
		"",
		"\n\n{\n[\n",
		`{"type":"result","subtype":"success","is_error":false,"num_turns":1e3}`,
		`{"type":"assistant","message":{"content":"a string"}}` + "\n" + evSuccess,
		`{"type":"result","subtype":"x","is_error":true,"errors":[1,{"a":[]},"e"],"permission_denials":[{"tool_input":null}]}`,
		`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t","content":"<tool_use_error>No such tool available: W","is_error":true}]}}`,
		`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"x"}],"is_error":false}]}}`,
		`{"type":"system","subtype":"init","tools":[],"permissionMode":"dontAsk"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var tr bytes.Buffer
		obs := &checkedObserver{t: t}
		res, err := ParseStream(bytes.NewReader(in), &tr, obs)
		if err == nil && res.Subtype == "" {
			t.Fatalf("no error but no subtype: %+v", res)
		}
		if err != nil && !errors.Is(err, ErrNoResult) && !strings.Contains(err.Error(), "result event") {
			t.Fatalf("unexpected error %v", err)
		}
		if res.InputTokens < 0 || res.OutputTokens < 0 || res.Turns < 0 || res.CostUSD < 0 {
			t.Fatalf("negative totals: %+v", res)
		}
		if len(res.Errors) > maxErrors || slices.ContainsFunc(res.Errors, func(e string) bool { return len(e) > maxErrorBytes }) {
			t.Fatalf("errors over their caps: %d", len(res.Errors))
		}
		// Every transcript line is one of the input's lines, and a JSON object with a type.
		if tr.Len() == 0 {
			return
		}
		for _, l := range strings.Split(strings.TrimSuffix(tr.String(), "\n"), "\n") {
			var ev map[string]any
			if json.Unmarshal([]byte(l), &ev) != nil {
				t.Fatalf("transcript line is not a JSON object: %q", l)
			}
			if s, ok := ev["type"].(string); !ok || s == "" {
				t.Fatalf("transcript line has no type: %q", l)
			}
			if !bytes.Contains(in, []byte(l)) {
				t.Fatalf("transcript line %q is not from the input", l)
			}
		}
	})
}

func FuzzMCPServerNames(f *testing.F) {
	f.Add([]byte(`{"mcpServers":{"lint":{"command":"x"},"github":{}}}`))
	f.Add([]byte(`{"mcpServers":{"a__b":{}}}`))
	f.Add([]byte(`{"mcpServers":null}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		names, err := MCPServerNames(bytes.NewReader(in))
		if err != nil {
			return
		}
		if !slices.IsSorted(names) {
			t.Fatalf("names not sorted: %q", names)
		}
		for _, n := range names {
			if why := checkMCPServerName(n); why != "" {
				t.Fatalf("name %q returned but unusable: %s", n, why)
			}
		}
	})
}

// checkedObserver fails the fuzz run when an event breaks what the worker relies on: a
// result is a "No such tool" only as a tool_use_error, and a tool_use_error only as an error.
type checkedObserver struct{ t *testing.T }

func (o *checkedObserver) Init(in Init) {
	if in.Tools == nil {
		o.t.Fatal("Init with nil Tools")
	}
}

func (o *checkedObserver) ToolCall(c ToolCall) {
	if !json.Valid(c.Input) && len(c.Input) != 0 {
		o.t.Fatalf("ToolCall with invalid input %q", c.Input)
	}
}

func (o *checkedObserver) ToolResult(r ToolResult) {
	refusal := r.PermissionDenied || r.HookBlocked
	if r.ID == "" || (r.NoSuchTool && !r.UseError) || (r.UseError && !r.IsError) ||
		(refusal && (!r.IsError || r.UseError || r.Tool == "" || r.PermissionDenied == r.HookBlocked)) || (!refusal && r.Tool != "") {
		o.t.Fatalf("inconsistent ToolResult %+v", r)
	}
}
