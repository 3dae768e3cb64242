package codexadapter

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/runtime/agentrun"
	"github.com/agora-dev/agora/internal/runtime/codexrt/responsestest"
	"github.com/agora-dev/agora/internal/secret/redact"
)

// TestCodexGate_RefusesBeforeCodexSees: through the real relay and gateway, a call outside
// the grant is cut out of the stream before its output_item.done reaches codex (so codex
// never runs it), recorded denied, and codex stopped; a granted call passes untouched.
func TestCodexGate_RefusesBeforeCodexSees(t *testing.T) {
	for _, tc := range []struct {
		name, cmd string
		allowed   bool
	}{
		{"granted", "touch ok", true},
		{"outside the grant", "touch ok; rm -rf /", false},
		{"not granted at all", "curl -s https://example.com/x.sh", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &memAuditor{}
			fake, err := responsestest.Start(codexTestKey, responsestest.Turns(responsestest.Exec(tc.cmd)))
			if err != nil {
				t.Fatal(err)
			}
			defer fake.Close()
			sock := startGatewayAt(t, a, fake.URL)
			gw := agentrun.DialGateway(sock)
			defer gw.Close()
			var mu sync.Mutex
			var cause error
			stopCause := func() error { mu.Lock(); defer mu.Unlock(); return cause }
			audit := &codexAudit{ctx: t.Context(), gw: gw, red: redact.New(nil), dir: t.TempDir(), seen: map[string]bool{}, shell: "/usr/bin/bash",
				grants: grant.Set{Tools: []string{"run_command"}, Commands: []string{"touch *"}},
				stop:   func(err error) { mu.Lock(); cause = err; mu.Unlock() }}
			rl, err := startCodexRelay(gw, gateResponse(audit.precheck))
			if err != nil {
				t.Fatal(err)
			}
			defer rl.Close()
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, rl.URL+"/responses", strings.NewReader(`{"model":"gpt-5.5","stream":true,"input":"go"}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+rl.Token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			sawCall := bytes.Contains(body, []byte("event: response.output_item.done"))
			if tc.allowed {
				if rerr != nil || !sawCall || !bytes.Contains(body, []byte("event: response.completed")) || stopCause() != nil {
					t.Errorf("granted call: read err %v, call seen %v, stop %v\n%s", rerr, sawCall, stopCause(), body)
				}
				if len(a.Calls()) != 0 {
					t.Errorf("the gate recorded %q for a granted call (the JSONL check records it)", a.Calls())
				}
				return
			}
			if sawCall || bytes.Contains(body, []byte("response.completed")) {
				t.Errorf("the refused call reached codex:\n%s", body)
			}
			if c := stopCause(); c == nil || !strings.Contains(c.Error(), "refused before it ran") {
				t.Errorf("codex not stopped with the reason: %v", c)
			}
			if c := a.Calls(); len(c) != 1 || !strings.HasPrefix(c[0], "exec_command denied ") {
				t.Errorf("tool.call records %q, want one exec_command denied", c)
			}
		})
	}
}

// TestCodexGate_SpellingsOfACall: a call is found however the event spells it: the name as a
// JSON escape, the event's JSON split over several data lines (an SSE client joins them), the
// arguments escaped, a data field with no space or no colon; what an SSE client could read
// otherwise than the gate (a lone carriage return, a byte order mark inside, a NUL) and a
// payload that cannot be read exactly are refused.
func TestCodexGate_SpellingsOfACall(t *testing.T) {
	call := func(name, args string) string {
		return `{"type":"response.output_item.done","item":{"type":"function_call","name":"` + name + `","call_id":"c1","arguments":` + args + `}}`
	}
	id := call("exec_command", `"{\"cmd\":\"id\"}"`)
	for _, tc := range []struct{ name, stream, wantCmd string }{
		{"escaped name", "data: " + call(`exec\u005fcommand`, `"{\"cmd\":\"rm -rf x\"}"`) + "\n\n", "rm -rf x"},
		{"escaped type", "data: " + strings.Replace(id, "output_item.done", `output_item.d\u006fne`, 1) + "\n\n", "id"},
		{"escaped argument key", "data: " + call("exec_command", `"{\"\\u0063md\":\"id\"}"`) + "\n\n", "id"},
		{"split over data lines", "data: " + strings.Replace(id, `"name":`, "\"name\":\ndata: ", 1) + "\n\n", "id"},
		{"no space after the colon", "data:" + id + "\n\n", "id"},
		{"CRLF lines", "event: x\r\ndata: " + id + "\r\n\r\n", "id"},
		{"name split over data lines", "data: " + strings.Replace(id, `"exec_command"`, "\"exec\\u005f\ndata: command\"", 1) + "\n\n", ""},
		{"lone carriage return", "data: {}\rdata: " + id + "\n\n", ""},
		{"byte order mark inside", ": c\n\xef\xbb\xbfdata: " + id + "\n\n", ""},
		{"NUL", "data: " + id + "\x00\n\n", ""},
		{"not JSON", "data: {exec_command\n\n", ""},
		{"a second JSON value", "data: " + id + " {}\n\n", ""},
		{"arguments not a string", "data: " + call("exec_command", `{"cmd":"id"}`) + "\n\n", ""},
		{"arguments not an object", "data: " + call("exec_command", `"[\"id\"]"`) + "\n\n", ""},
		{"arguments without cmd", "data: " + call("exec_command", `"{\"command\":\"id\"}"`) + "\n\n", ""},
		{"an argument Codex does not offer", "data: " + call("exec_command", `"{\"cmd\":\"id\",\"environment_id\":\"remote\"}"`) + "\n\n", ""},
		{"a shell outside the system's", "data: " + call("exec_command", `"{\"cmd\":\"id\",\"shell\":\"/agora/workspace/bash\"}"`) + "\n\n", "id"},
		{"an item type agora does not know", `data: {"type":"response.output_item.done","item":{"type":"local_shell_call","call_id":"c1","action":{"type":"exec","command":["id"]}}}` + "\n\n", ""},
		{"a tool agora does not let codex run", "data: " + call("shell", `"{\"command\":[\"id\"]}"`) + "\n\n", ""},
		{"a call in a response's output", `data: {"type":"response.completed","response":{"output":[{"type":"function_call","name":"exec_command","call_id":"c1","arguments":"{\"cmd\":\"id\"}"}]}}` + "\n\n", "id"},
		{"a call in any event", `data: {"type":"response.whatever","item":{"type":"function_call","name":"exec_command","call_id":"c1","arguments":"{\"cmd\":\"id\"}"}}` + "\n\n", "id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var judged []modelCall
			g := &callGate{src: bufioReader(tc.stream), body: io.NopCloser(nil), judge: func(c modelCall) error {
				judged = append(judged, c)
				return errors.New("refused")
			}}
			out, err := io.ReadAll(g)
			if err == nil || len(out) != 0 {
				t.Fatalf("the call passed the gate: err %v, out %q", err, out)
			}
			if len(judged) != 1 {
				t.Fatalf("judged %+v, want one call", judged)
			}
			if c := judged[0]; tc.wantCmd != "" && (c.Exec == nil || *c.Exec.Cmd != tc.wantCmd || c.Refused != "") {
				t.Errorf("judged %+v, want exec_command %q", c, tc.wantCmd)
			} else if tc.wantCmd == "" && c.Refused == "" {
				t.Errorf("judged %+v, want a refusal", c)
			}
		})
	}
}

// TestCodexGate_PassesWhatItMayPass: a stream of events the gate reads exactly, with calls
// judge lets through, reaches codex byte for byte; items in progress (arguments not yet
// streamed) and codex's bookkeeping tools are not judged as commands.
func TestCodexGate_PassesWhatItMayPass(t *testing.T) {
	stream := "\xef\xbb\xbf: a comment\nevent: response.created\nid: 1\ndata: {\"type\":\"response.created\",\"response\":{\"output\":[]}}\n\n" +
		`data: {"type":"response.output_item.added","item":{"type":"function_call","name":"exec_command","call_id":"c1","arguments":""}}` + "\n\n" +
		`data: {"type":"response.output_item.done","item":{"type":"function_call","name":"update_plan","call_id":"c2","arguments":"{\"plan\":[]}"}}` + "\n\n" +
		`data: {"type":"response.output_item.done","item":{"type":"message","content":[{"type":"output_text","text":"exec_command \\"}]}}` + "\n\n" +
		"data\n\n" + "data: [unfinished"
	var judged []modelCall
	g := &callGate{src: bufioReader(stream), body: io.NopCloser(nil), judge: func(c modelCall) error {
		judged = append(judged, c)
		return nil
	}}
	out, err := io.ReadAll(g)
	if err == nil || !strings.Contains(err.Error(), "cannot read exactly") {
		t.Errorf("an unfinished last event passed: %v", err)
	}
	if want := stream[:strings.Index(stream, "data: [unfinished")]; string(out) != want {
		t.Errorf("the stream changed:\n got %q\nwant %q", out, want)
	}
	if len(judged) != 3 || judged[0].Exec != nil || judged[0].Tool != "exec_command" || judged[1].Tool != "update_plan" || judged[2].Tool != modelAnswerTool {
		t.Errorf("judged %+v, want the exec_command in progress (no arguments), update_plan, then the unreadable event", judged)
	}
}

// FuzzCallGate: whatever the stream, the gate never panics, and it judges every call that a
// case-sensitive reader of what it releases finds: every item of an event it passes, other
// than a message or reasoning, was judged, and every exec_command's cmd was judged as that
// reader reads it. A stream of readable events without calls passes byte for byte.
func FuzzCallGate(f *testing.F) {
	f.Add("event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"item\":{\"type\":\"function_call\",\"name\":\"exec_command\",\"call_id\":\"c\",\"arguments\":\"{\\\"cmd\\\":\\\"ls\\\"}\"}}\n\n")
	f.Add("event: response.created\ndata: {\"type\":\"response.created\"}\n\ndata: [DONE]\n\n")
	f.Add("data: {\"item\":{\"type\":\"function_call\",\"name\":\"exec_command\",\"arguments\":\"{\\\"cmd\\\":\\\"a\\\",\\\"Cmd\\\":\\\"b\\\"}\"}}\n\n")
	f.Add("data: {\"response\":{\"output\":[{\"type\":\"custom_tool_call\",\"name\":\"apply_patch\"}]}}\r\n\r\n")
	f.Fuzz(func(t *testing.T, s string) {
		cmds := map[string]bool{}
		judgedItems := 0
		g := &callGate{src: bufioReader(s), body: io.NopCloser(nil), judge: func(c modelCall) error {
			if c.Refused != "" {
				return errors.New("refused")
			}
			judgedItems++
			if c.Exec != nil {
				cmds[*c.Exec.Cmd] = true
			}
			return nil
		}}
		out, err := io.ReadAll(g)
		if !strings.HasPrefix(s, string(out)) {
			t.Fatalf("the gate released what the stream did not hold: %q", out)
		}
		items := 0
		for _, payload := range sseData(string(out)) {
			var ev map[string]any
			if json.Unmarshal([]byte(payload), &ev) != nil {
				t.Fatalf("the gate released an event a reader cannot decode: %q", payload)
			}
			var found []any
			if it, ok := ev["item"]; ok {
				found = append(found, it)
			}
			if r, ok := ev["response"].(map[string]any); ok {
				if o, ok := r["output"].([]any); ok {
					found = append(found, o...)
				}
			}
			for _, it := range found {
				m, _ := it.(map[string]any)
				if typ, _ := m["type"].(string); typ == "message" || typ == "reasoning" {
					continue
				}
				items++
				if m["type"] != "function_call" || m["name"] != "exec_command" {
					continue
				}
				var args map[string]any
				if a, _ := m["arguments"].(string); a != "" && json.Unmarshal([]byte(a), &args) == nil {
					if c, ok := args["cmd"].(string); ok && !cmds[c] {
						t.Fatalf("exec_command %q was released but never judged (judged %v)", c, cmds)
					}
				}
			}
		}
		if items > judgedItems {
			t.Fatalf("%d items released, %d judged", items, judgedItems)
		}
		if err == io.EOF || err == nil {
			if string(out) != s {
				t.Fatalf("a stream the gate read to its end changed:\n in %q\nout %q", s, out)
			}
		}
	})
}

// sseData returns the data of each event of an event stream, as an SSE client reads it.
func sseData(s string) []string {
	var out []string
	var data []string
	flush := func() {
		if d := strings.Join(data, "\n"); d != "" {
			out = append(out, d)
		}
		data = nil
	}
	s = strings.TrimPrefix(s, "\xef\xbb\xbf")
	lines := strings.Split(s, "\n")
	for i, line := range lines {
		line = strings.TrimSuffix(line, "\r")
		if i == len(lines)-1 && line != "" {
			break // an unfinished last line is not a line yet
		}
		if line == "" {
			flush()
			continue
		}
		name, value, _ := strings.Cut(line, ":")
		if name == "data" {
			data = append(data, strings.TrimPrefix(value, " "))
		}
	}
	return out
}
