package worker

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/agora-dev/agora/internal/grant"
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
			gw := dialGateway(sock)
			defer gw.close()
			var mu sync.Mutex
			var cause error
			stopCause := func() error { mu.Lock(); defer mu.Unlock(); return cause }
			audit := &codexAudit{ctx: t.Context(), gw: gw, red: redact.New(nil), dir: t.TempDir(), seen: map[string]bool{},
				grants: grant.Set{Tools: []string{"run_command"}, Commands: []string{"touch *"}},
				stop:   func(err error) { mu.Lock(); cause = err; mu.Unlock() }}
			rl, err := startCodexRelay(gw, gateResponse(audit.precheck))
			if err != nil {
				t.Fatal(err)
			}
			defer rl.close()
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
				if len(a.calls()) != 0 {
					t.Errorf("the gate recorded %q for a granted call (the JSONL check records it)", a.calls())
				}
				return
			}
			if sawCall || bytes.Contains(body, []byte("response.completed")) {
				t.Errorf("the refused call reached codex:\n%s", body)
			}
			if c := stopCause(); c == nil || !strings.Contains(c.Error(), "refused before it ran") {
				t.Errorf("codex not stopped with the reason: %v", c)
			}
			if c := a.calls(); len(c) != 1 || !strings.HasPrefix(c[0], "exec_command denied ") {
				t.Errorf("tool.call records %q, want one exec_command denied", c)
			}
		})
	}
}

// TestCodexGate_SpellingsOfACall: a call is found however the event spells it: the name as a
// JSON escape, the event's JSON split over several data lines (an SSE client joins them), and
// the arguments escaped; a payload that may hide a call but cannot be read is refused.
func TestCodexGate_SpellingsOfACall(t *testing.T) {
	call := func(name, args string) string {
		return `{"type":"response.output_item.done","item":{"type":"function_call","name":"` + name + `","call_id":"c1","arguments":` + args + `}}`
	}
	for _, tc := range []struct{ name, stream, wantCmd string }{
		{"escaped name", "data: " + call(`exec\u005fcommand`, `"{\"cmd\":\"rm -rf x\"}"`) + "\n\n", "rm -rf x"},
		{"escaped type", "data: " + strings.Replace(call("exec_command", `"{\"cmd\":\"id\"}"`), "output_item.done", `output_item.d\u006fne`, 1) + "\n\n", "id"},
		{"split over data lines", "data: " + strings.Replace(call("exec_command", `"{\"cmd\":\"id\"}"`), `"name":`, "\"name\":\ndata: ", 1) + "\n\n", "id"},
		{"name split over data lines", "data: " + strings.Replace(call("exec_command", `"{\"cmd\":\"id\"}"`), `"exec_command"`, "\"exec\\u005f\ndata: command\"", 1) + "\n\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var checked []string
			g := &execGate{src: bufioReader(tc.stream), body: io.NopCloser(nil), check: func(_, cmd string) error {
				checked = append(checked, cmd)
				return errors.New("refused")
			}}
			out, err := io.ReadAll(g)
			if err == nil || len(out) != 0 {
				t.Fatalf("the call passed the gate: err %v, out %q", err, out)
			}
			if tc.wantCmd != "" && (len(checked) != 1 || checked[0] != tc.wantCmd) {
				t.Errorf("checked %q, want [%q]", checked, tc.wantCmd)
			}
		})
	}
}

// FuzzExecGate: whatever the stream, the gate never panics, passes a stream with no call
// through byte for byte, and refuses whenever the check refuses a call it found.
func FuzzExecGate(f *testing.F) {
	f.Add("event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"item\":{\"type\":\"function_call\",\"name\":\"exec_command\",\"call_id\":\"c\",\"arguments\":\"{\\\"cmd\\\":\\\"ls\\\"}\"}}\n\n")
	f.Add("event: response.created\ndata: {\"type\":\"response.created\"}\n\ndata: [DONE]\n\n")
	f.Add("data: {exec_command\n\n")
	f.Fuzz(func(t *testing.T, s string) {
		refusals := 0
		g := &execGate{src: bufioReader(s), body: io.NopCloser(nil), check: func(string, string) error {
			refusals++
			return errors.New("no")
		}}
		out, err := io.ReadAll(g)
		if refusals == 0 && !strings.Contains(s, "exec_command") && !strings.Contains(s, `\`) && (err != nil || string(out) != s) {
			t.Errorf("a stream without a call changed: err %v\n in %q\nout %q", err, s, out)
		}
		if refusals > 0 && err == nil {
			t.Error("a refused call did not cut the stream")
		}
	})
}
