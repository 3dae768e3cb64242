package codexadapter

import (
	"encoding/json"
	"net/http"
	"testing"
)

// TestRedTeam4_CodexGateRefusesStdinInput: write_stdin that writes
// input to a running command is refused by the relay's check, however the model spells it;
// a poll (no input) passes. Failed before: every write_stdin passed unjudged.
func TestRedTeam4_CodexGateRefusesStdinInput(t *testing.T) {
	for _, tc := range []struct {
		args    string
		refused bool
	}{
		{`{"session_id":8237,"chars":".shell id\n"}`, true},
		{`{"session_id":8237,"chars":"\u002eshell id"}`, true},
		{`{"session_id":8237,"chars":"","chars":"x"}`, true},
		{`{"session_id":8237,"Chars":"x"}`, true},
		{`{"session_id":8237,"chars":"x","stdin":"y"}`, true},
		{`{"session_id":8237,"chars":7}`, true},
		{`[1]`, true},
		{`{"session_id":8237,"chars":"","yield_time_ms":1000}`, false},
		{`{"session_id":8237,"yield_time_ms":1000,"max_output_tokens":100}`, false},
		{``, false}, // response.output_item.added: no arguments yet
	} {
		event := `{"type":"response.output_item.done","item":{"type":"function_call","name":"write_stdin","call_id":"c1","arguments":` + jsonString(tc.args) + `}}`
		calls, why := eventCalls([]byte(event))
		refused := why != ""
		for _, c := range calls {
			refused = refused || c.Refused != ""
		}
		if refused != tc.refused {
			t.Errorf("write_stdin %s: refused = %v (%q %+v), want %v", tc.args, refused, why, calls, tc.refused)
		}
	}
}

// FuzzStdinCall: stdinCall never panics, and any arguments a case-sensitive reader finds
// input in are refused.
func FuzzStdinCall(f *testing.F) {
	f.Add(`{"session_id":1,"chars":"x"}`)
	f.Add(`{"session_id":1,"chars":""}`)
	f.Add(`{"chars":"a","chars":""}`)
	f.Fuzz(func(t *testing.T, args string) {
		why := stdinCall(&args)
		var m map[string]any
		if json.Unmarshal([]byte(args), &m) == nil {
			if s, ok := m["chars"].(string); ok && s != "" && why == "" {
				t.Fatalf("input %q in %q passed", s, args)
			}
		}
	})
}

// TestRedTeam4_CodexGateRefusesAProtocolSwitch: an answer that switches
// protocols (101, a WebSocket, which Codex can speak the Responses API over) is refused by the
// gate and recorded, never relayed unread. Failed before: a 101 passed the gate untouched
// (only 2xx answers were read).
func TestRedTeam4_CodexGateRefusesAProtocolSwitch(t *testing.T) {
	var judged []modelCall
	gate := gateResponse(func(c modelCall) error { judged = append(judged, c); return nil })
	resp := &http.Response{StatusCode: http.StatusSwitchingProtocols, Header: http.Header{"Upgrade": {"websocket"}}, Body: http.NoBody}
	if err := gate(resp); err == nil {
		t.Error("a 101 answer passed the gate")
	}
	if len(judged) != 1 || judged[0].Refused == "" || judged[0].Tool != modelAnswerTool {
		t.Errorf("judged %+v, want one refusal of the model's answer", judged)
	}
}
