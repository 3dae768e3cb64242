package responsestest

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func post(t *testing.T, s *Server, key, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, s.URL+"/responses", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// events reads an SSE body into its events' data, checking each event line names its type.
func events(t *testing.T, resp *http.Response) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(resp.Body)
	var name string
	for sc.Scan() {
		line := sc.Text()
		if n, ok := strings.CutPrefix(line, "event: "); ok {
			name = n
		}
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			var m map[string]any
			if err := json.Unmarshal([]byte(d), &m); err != nil {
				t.Fatalf("bad data %q: %v", d, err)
			}
			if m["type"] != name {
				t.Errorf("event %q carries type %v", name, m["type"])
			}
			if int(m["sequence_number"].(float64)) != len(out) {
				t.Errorf("event %d has sequence_number %v", len(out), m["sequence_number"])
			}
			out = append(out, m)
		}
	}
	return out
}

func TestServer_StreamsAFunctionCallThenText(t *testing.T) {
	s, err := Start("sk-real", Turns(Exec("ls -la"), Say("all done")))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	evs := events(t, post(t, s, "sk-real", `{"model":"gpt-5-codex","stream":true,"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"go"}]}]}`))
	var types []string
	var args strings.Builder
	for _, e := range evs {
		types = append(types, e["type"].(string))
		if e["type"] == "response.function_call_arguments.delta" {
			args.WriteString(e["delta"].(string))
		}
	}
	want := "response.created response.in_progress response.output_item.added response.function_call_arguments.delta response.function_call_arguments.delta response.function_call_arguments.delta response.function_call_arguments.done response.output_item.done response.completed"
	if got := strings.Join(types, " "); got != want {
		t.Errorf("events\n got %s\nwant %s", got, want)
	}
	if args.String() != `{"cmd":"ls -la"}` {
		t.Errorf("deltas join to %q", args.String())
	}
	last := evs[len(evs)-1]["response"].(map[string]any)
	if u := last["usage"].(map[string]any); u["input_tokens"] != 100.0 || u["output_tokens"] != 10.0 {
		t.Errorf("usage %v", u)
	}
	item := evs[2]["item"].(map[string]any)
	callID := item["call_id"].(string)

	// The next turn answers the call; the reply is text.
	evs = events(t, post(t, s, "sk-real", `{"model":"gpt-5-codex","stream":true,"input":[{"type":"function_call","call_id":"`+callID+`","name":"exec_command","arguments":"{}"},{"type":"function_call_output","call_id":"`+callID+`","output":"total 0"}]}`))
	var text strings.Builder
	for _, e := range evs {
		if e["type"] == "response.output_text.delta" {
			text.WriteString(e["delta"].(string))
		}
	}
	if text.String() != "all done" || evs[len(evs)-1]["type"] != "response.completed" {
		t.Errorf("second turn said %q, last event %v", text.String(), evs[len(evs)-1]["type"])
	}
	if r := s.Requests()[1]; r.Turn != 1 || r.Outputs[callID] != "total 0" {
		t.Errorf("second request turn %d outputs %v", r.Turn, r.Outputs)
	}
}

func TestServer_Refusals(t *testing.T) {
	s, err := Start("sk-real", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, tc := range []struct {
		name, key, body string
		status          int
		msg             string
	}{
		{"no key", "", `{"model":"m"}`, 401, "didn't provide an API key"},
		{"wrong key", "sk-other", `{"model":"m"}`, 401, "Incorrect API key"},
		{"bad json", "sk-real", `{`, 400, "could not parse"},
		{"no model", "sk-real", `{"input":[]}`, 400, "'model'"},
		{"orphan output", "sk-real", `{"model":"m","input":[{"type":"function_call_output","call_id":"call_x","output":"x"}]}`, 400, "No tool call found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := post(t, s, tc.key, tc.body)
			var e struct{ Error struct{ Message string } }
			json.NewDecoder(resp.Body).Decode(&e)
			if resp.StatusCode != tc.status || !strings.Contains(e.Error.Message, tc.msg) {
				t.Errorf("got %d %q, want %d %q", resp.StatusCode, e.Error.Message, tc.status, tc.msg)
			}
		})
	}
	for _, r := range s.Requests() {
		if r.Rejected == "" {
			t.Errorf("request %s not marked rejected", r.Body)
		}
	}
}

func TestServer_JSON(t *testing.T) {
	s, err := Start("", Turns(Say("hello")))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	resp := post(t, s, "", `{"model":"m","input":"hi"}`)
	var o struct {
		Object, Status string
		Output         []struct {
			Type    string
			Content []struct{ Type, Text string }
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&o); err != nil {
		t.Fatal(err)
	}
	if o.Object != "response" || o.Status != "completed" || len(o.Output) != 1 || o.Output[0].Content[0].Text != "hello" {
		t.Errorf("got %+v", o)
	}
}

// TestPatchStream: a custom tool call (apply_patch) streams as the API sends one: the item
// announced without input, the input in deltas, its .done with the whole input, then the
// item done with input and call id; the next turn's custom_tool_call_output pairs with it.
func TestPatchStream(t *testing.T) {
	patch := "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch\n"
	s, err := Start("sk-real", Turns(Patch(patch), Say("ok")))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	evs := events(t, post(t, s, "sk-real", `{"model":"gpt-5.5","stream":true,"input":"go"}`))
	var types []string
	var deltas strings.Builder
	for _, e := range evs {
		types = append(types, e["type"].(string))
		if e["type"] == "response.custom_tool_call_input.delta" {
			deltas.WriteString(e["delta"].(string))
		}
	}
	want := "response.created response.in_progress response.output_item.added " +
		"response.custom_tool_call_input.delta response.custom_tool_call_input.delta response.custom_tool_call_input.delta " +
		"response.custom_tool_call_input.done response.output_item.done response.completed"
	if strings.Join(types, " ") != want {
		t.Fatalf("events %v, want %s", types, want)
	}
	if deltas.String() != patch || evs[6]["input"] != patch {
		t.Errorf("deltas %q, done %v, want the patch", deltas.String(), evs[6]["input"])
	}
	added, done := evs[2]["item"].(map[string]any), evs[7]["item"].(map[string]any)
	if added["type"] != "custom_tool_call" || added["input"] != "" || done["input"] != patch || done["name"] != "apply_patch" || done["call_id"] == "" {
		t.Errorf("added %v done %v", added, done)
	}
	callID := done["call_id"].(string)
	resp := post(t, s, "sk-real", `{"model":"gpt-5.5","stream":true,"input":[{"type":"custom_tool_call","call_id":"`+callID+`","name":"apply_patch","input":"x"},{"type":"custom_tool_call_output","call_id":"`+callID+`","output":"Success"}]}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("second turn: %d", resp.StatusCode)
	}
	if reqs := s.Requests(); reqs[1].Turn != 1 || reqs[1].Outputs[callID] != "Success" {
		t.Errorf("second request %+v, want turn 1 with the patch's output", reqs[1])
	}
}
