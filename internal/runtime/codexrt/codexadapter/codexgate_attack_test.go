package codexadapter

import (
	"bytes"
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

// relayRun is what one model answer did at the relay: what codex would read, how reading it
// ended, the tool.call records, and why codex was stopped (nil: not stopped).
type relayRun struct {
	body    []byte
	readErr error
	calls   []string
	stop    error
}

// throughRelay asks the Responses fake for one answer (reply) through the real relay, its gate
// and the real gateway, as codex would, under grants.
func throughRelay(t *testing.T, grants grant.Set, reply responsestest.Reply) relayRun {
	t.Helper()
	a := &memAuditor{}
	fake, err := responsestest.Start(codexTestKey, responsestest.Turns(reply))
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	sock := startGatewayAt(t, a, fake.URL)
	gw := agentrun.DialGateway(sock)
	defer gw.Close()
	var mu sync.Mutex
	var cause error
	audit := &codexAudit{ctx: t.Context(), gw: gw, red: redact.New(nil), dir: t.TempDir(), seen: map[string]bool{}, shell: "/usr/bin/bash",
		grants: grants, stop: func(err error) { mu.Lock(); cause = err; mu.Unlock() }}
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
	mu.Lock()
	defer mu.Unlock()
	return relayRun{body: body, readErr: rerr, calls: a.Calls(), stop: cause}
}

// rewriteDone applies replace to the stream's response.output_item.done event only.
func rewriteDone(old, new string) func(string) string {
	return func(d string) string {
		if strings.Contains(d, `"type":"response.output_item.done"`) {
			return strings.Replace(d, old, new, 1)
		}
		return d
	}
}

// TestCodexGate_DuplicateKeys: the model says two things in one event, once
// for a reader that folds case or keeps the last duplicate (encoding/json, which the gate
// used) and once for Codex, which reads each key exactly. Each answer is refused whole, before
// codex sees the call, recorded with why, and codex stopped. Before the fix every one passed
// the gate (judged as "git status" or as no exec_command at all) and Codex ran the echo.
func TestCodexGate_DuplicateKeys(t *testing.T) {
	grants := grant.Set{Tools: []string{"run_command"}, Commands: []string{"git status"}}
	pwn := `{"cmd":"echo PWNED > pwned.txt"}`
	for _, tc := range []struct {
		name  string
		reply responsestest.Reply
	}{
		{"cmd and Cmd", responsestest.Reply{Calls: []responsestest.Call{{Name: "exec_command",
			Arguments: `{"cmd":"echo PWNED > pwned.txt","Cmd":"git status"}`}}}},
		{"cmd twice", responsestest.Reply{Calls: []responsestest.Call{{Name: "exec_command",
			Arguments: `{"cmd":"echo PWNED > pwned.txt","cmd":"git status"}`}}}},
		{"name and Name", responsestest.Reply{Calls: []responsestest.Call{{Name: "exec_command", Arguments: pwn}},
			Rewrite: rewriteDone(`"name":"exec_command"`, `"name":"exec_command","Name":"write_stdin"`)}},
		{"item type and Type", responsestest.Reply{Calls: []responsestest.Call{{Name: "exec_command", Arguments: pwn}},
			Rewrite: rewriteDone(`"type":"function_call"`, `"type":"function_call","Type":"message"`)}},
		{"event type and Type", responsestest.Reply{Calls: []responsestest.Call{{Name: "exec_command", Arguments: pwn}},
			Rewrite: rewriteDone(`"type":"response.output_item.done"`, `"type":"response.output_item.done","Type":"response.in_progress"`)}},
		{"item and Item", responsestest.Reply{Calls: []responsestest.Call{{Name: "exec_command", Arguments: pwn}},
			Rewrite: rewriteDone(`"type":"response.output_item.done"`, `"Item":{"type":"function_call","name":"exec_command","call_id":"call_x","arguments":"{\"cmd\":\"git status\"}"},"type":"response.output_item.done"`)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := throughRelay(t, grants, tc.reply)
			if bytes.Contains(r.body, []byte("response.output_item.done")) || bytes.Contains(r.body, []byte("response.completed")) || r.readErr == nil {
				t.Errorf("the call reached codex (read err %v):\n%s", r.readErr, r.body)
			}
			if r.stop == nil {
				t.Error("codex was not stopped")
			}
			if len(r.calls) != 1 || !strings.Contains(r.calls[0], " denied ") || !strings.Contains(r.calls[0], "duplicate key") {
				t.Errorf("tool.call records %q, want one denial saying the answer has a duplicate key", r.calls)
			}
		})
	}
}

// TestCodexGate_ShellAndLogin: the relay judges the argv Codex will run, not only cmd: a
// shell the model names must be a system shell (Codex runs another name as whatever it takes
// it for, a workspace "bash" included), "login": false runs "-c", not "-lc", and an argument
// Codex's tool does not offer is refused, since Codex may read it in a way the gate cannot see.
func TestCodexGate_ShellAndLogin(t *testing.T) {
	for _, tc := range []struct {
		name, args string
		commands   []string
		allowed    bool
	}{
		{"default shell", `{"cmd":"git status"}`, []string{"git status"}, true},
		{"system sh", `{"cmd":"git status","shell":"/bin/sh","login":true}`, []string{"git status"}, true},
		{"a bash in the workspace", `{"cmd":"git status","shell":"/agora/workspace/bash"}`, []string{"git status", "bash -lc *"}, false},
		{"a shell by name", `{"cmd":"git status","shell":"bash"}`, []string{"git status"}, false},
		{"bash -lc * and login false", `{"cmd":"echo hi > x","login":false}`, []string{"bash -lc *"}, false},
		{"bash -c * and login false", `{"cmd":"echo hi > x","login":false}`, []string{"bash -c *"}, true},
		{"login not a boolean", `{"cmd":"git status","login":"false"}`, []string{"git status"}, false},
		{"an argument Codex does not offer", `{"cmd":"git status","environment_id":"elsewhere"}`, []string{"git status"}, false},
		{"all the arguments Codex offers", `{"cmd":"git status","workdir":"/agora/workspace","tty":false,"yield_time_ms":1000,"max_output_tokens":100,"sandbox_permissions":"use_default","justification":"j","prefix_rule":["git"],"login":true,"shell":"/usr/bin/bash"}`, []string{"git status"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := throughRelay(t, grant.Set{Tools: []string{"run_command"}, Commands: tc.commands},
				responsestest.Reply{Calls: []responsestest.Call{{Name: "exec_command", Arguments: tc.args}}})
			passed := bytes.Contains(r.body, []byte("response.completed")) && r.readErr == nil && r.stop == nil
			if passed != tc.allowed {
				t.Errorf("passed %v, want %v (read err %v, stop %v, records %q)", passed, tc.allowed, r.readErr, r.stop, r.calls)
			}
			if !tc.allowed && (len(r.calls) != 1 || !strings.Contains(r.calls[0], " denied ")) {
				t.Errorf("tool.call records %q, want one denial", r.calls)
			}
		})
	}
}
