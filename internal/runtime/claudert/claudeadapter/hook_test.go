package claudeadapter

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/egress"
	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/modelgw"
	"github.com/agora-dev/agora/internal/runtime/agentrun"
	"github.com/agora-dev/agora/internal/runtime/claudert/anthropictest"
	"github.com/agora-dev/agora/internal/secret/redact"
	"github.com/agora-dev/agora/internal/worker/wire"
)

const hookSecret = "s3cret-value-0123456789"

func hookEvent(event, tool, id, input string, extra ...string) string {
	s := `{"session_id":"s-1","transcript_path":"/tmp/t.jsonl","cwd":"/agora/workspace","permission_mode":"dontAsk",` +
		`"hook_event_name":"` + event + `","tool_name":"` + tool + `","tool_use_id":"` + id + `","tool_input":` + input
	for _, e := range extra {
		s += "," + e
	}
	return s + "}"
}

// TestHookMain: the pre-tool hook records a covered call "requested" and lets it go on,
// refuses (exit 2) a call the grant does not cover after recording it "denied", and refuses
// every call it cannot record; the post-tool hooks record the outcome. Each leaves its mark,
// and the arguments' hash masks the secrets named on its command line.
func TestHookMain(t *testing.T) {
	masked := agentrun.ArgsHash(redact.New([][]byte{[]byte(hookSecret)}), json.RawMessage(`{"command":"echo `+hookSecret+`"}`))
	if masked == agentrun.ArgsHash(redact.New(nil), json.RawMessage(`{"command":"echo `+hookSecret+`"}`)) {
		t.Fatal("the masked and unmasked hashes are equal")
	}
	t.Setenv("TOKEN", hookSecret)
	lsHash := agentrun.ArgsHash(redact.New(nil), json.RawMessage(`{"command":"ls"}`))
	preCall := "Bash requested " + reasonRequested + "|pre|toolu_01A|" + lsHash
	for _, tc := range []struct {
		name      string
		in        string
		fail      bool     // the audit log keeps no tool.call record
		pre       bool     // the call's pre report is on record first (the gateway admits a post only then)
		noGateway bool     // the socket is gone
		args      []string // more hook arguments
		wantCode  int
		wantCalls []string
		wantStd   string // in stderr
		env       string // a variable of the hook's environment, NAME=VALUE
		preload   bool   // /etc/ld.so.preload exists
	}{
		{
			name:      "PreCovered",
			in:        hookEvent("PreToolUse", "Bash", "toolu_01A", `{"command":"echo `+hookSecret+`"}`),
			wantCode:  hookContinue,
			wantCalls: []string{"Bash requested " + reasonRequested + "|pre|toolu_01A|" + masked},
		},
		{
			// Every Bash line is judged against the grant's patterns by the hook itself.
			name:      "PreBashNotGranted",
			in:        hookEvent("PreToolUse", "Bash", "toolu_01A", `{"command":"cat PRIVATE.txt"}`),
			wantCode:  hookBlock,
			wantCalls: []string{"Bash denied " + reasonCommandNotGranted + "|pre|toolu_01A|" + agentrun.ArgsHash(redact.New(nil), json.RawMessage(`{"command":"cat PRIVATE.txt"}`))},
			wantStd:   `command ["cat" "PRIVATE.txt"] is not covered by this subagent's grant; the grant allows "ls", "echo *"; the call is refused`,
		},
		{
			name:      "PreBashNotSimple",
			in:        hookEvent("PreToolUse", "Bash", "toolu_01A", `{"command":"ls; id"}`),
			wantCode:  hookBlock,
			wantCalls: []string{"Bash denied " + reasonLineNotSimple + "|pre|toolu_01A|" + agentrun.ArgsHash(redact.New(nil), json.RawMessage(`{"command":"ls; id"}`))},
			wantStd:   `not one simple command`,
		},
		{
			name:      "PreBashSecretInRefusal",
			in:        hookEvent("PreToolUse", "Bash", "toolu_01A", `{"command":"cat `+hookSecret+`"}`),
			wantCode:  hookBlock,
			wantCalls: []string{"Bash denied " + reasonCommandNotGranted + "|pre|toolu_01A|" + agentrun.ArgsHash(redact.New([][]byte{[]byte(hookSecret)}), json.RawMessage(`{"command":"cat `+hookSecret+`"}`))},
			wantStd:   `command ["cat" "[REDACTED]"] is not covered`,
		},
		{
			// claude reads "command" exactly; a key that matches it only under case folding is
			// no command to judge, so the call is refused.
			name:      "PreBashCaseFoldedKey",
			in:        hookEvent("PreToolUse", "Bash", "toolu_01A", `{"Command":"ls"}`),
			wantCode:  hookBlock,
			wantCalls: []string{"Bash denied " + reasonInputUnreadable + "|pre|toolu_01A|" + agentrun.ArgsHash(redact.New(nil), json.RawMessage(`{"Command":"ls"}`))},
			wantStd:   `Bash input: no "command"`,
		},
		{
			name:     "PreBashDuplicateKey",
			in:       hookEvent("PreToolUse", "Bash", "toolu_01A", `{"command":"ls","command":"cat PRIVATE.txt"}`),
			wantCode: hookBlock,
			wantStd:  "duplicate",
		},
		{
			name:      "PreMCPToolOfAGrantedServer",
			in:        hookEvent("PreToolUse", "mcp__docs__search", "toolu_01A", `{}`),
			wantCode:  hookContinue,
			wantCalls: []string{"mcp__docs__search requested " + reasonRequested + "|pre|toolu_01A|" + agentrun.ArgsHash(redact.New(nil), json.RawMessage(`{}`))},
		},
		{
			name:      "PreNotCovered",
			in:        hookEvent("PreToolUse", "Write", "toolu_01A", `{"file_path":"/x","content":"y"}`),
			wantCode:  hookBlock,
			wantCalls: []string{"Write denied " + reasonNotCovered + "|pre|toolu_01A|" + agentrun.ArgsHash(redact.New(nil), json.RawMessage(`{"file_path":"/x","content":"y"}`))},
			wantStd:   `tool "Write" is not covered by this subagent's grant`,
		},
		{
			name:     "PreNotKept",
			in:       hookEvent("PreToolUse", "Bash", "toolu_01A", `{"command":"ls"}`),
			fail:     true,
			wantCode: hookBlock,
			wantStd:  "could not be recorded in the audit log, so it is refused",
		},
		{
			name:      "PreGatewayUnreachable",
			in:        hookEvent("PreToolUse", "Bash", "toolu_01A", `{"command":"ls"}`),
			noGateway: true,
			wantCode:  hookBlock,
			wantStd:   "could not be recorded in the audit log, so it is refused",
		},
		{
			name:      "PostRan",
			in:        hookEvent("PostToolUse", "Bash", "toolu_01A", `{"command":"ls"}`, `"tool_response":{"stdout":"a"}`, `"duration_ms":42`),
			pre:       true,
			wantCode:  hookContinue,
			wantCalls: []string{preCall, "Bash allowed " + reasonRan + "|post|toolu_01A|" + agentrun.ArgsHash(redact.New(nil), json.RawMessage(`{"command":"ls"}`))},
		},
		{
			name:      "PostInterrupted",
			in:        hookEvent("PostToolUseFailure", "Bash", "toolu_01A", `{"command":"ls"}`, `"error":"killed"`, `"is_interrupt":true`),
			pre:       true,
			wantCode:  hookContinue,
			wantCalls: []string{preCall, "Bash error " + reasonInterrupt + "|post|toolu_01A|" + agentrun.ArgsHash(redact.New(nil), json.RawMessage(`{"command":"ls"}`))},
		},
		{
			name:     "PostNotKept",
			in:       hookEvent("PostToolUse", "Bash", "toolu_01A", `{"command":"ls"}`),
			fail:     true,
			wantCode: hookBlock,
			wantStd:  "the outcome of this call could not be recorded",
		},
		{
			name:     "Malformed",
			in:       `{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{}}`,
			wantCode: hookBlock,
			wantStd:  "tool_use_id: want a string",
		},
		{
			name:     "SecretNotInTheEnvironment",
			in:       hookEvent("PreToolUse", "Bash", "toolu_01A", `{}`),
			args:     []string{"--secret-env=NOT_SET_ANYWHERE"},
			wantCode: hookBlock,
			wantStd:  "NOT_SET_ANYWHERE is not in the hook's environment",
		},
		{
			name:     "LoaderVariableSet",
			in:       hookEvent("PreToolUse", "Bash", "toolu_01A", `{"command":"ls"}`),
			env:      "LD_AUDIT=/tmp/x.so",
			wantCode: hookBlock,
			wantStd:  "the environment sets LD_AUDIT",
		},
		{
			name:     "PreloadFileExists",
			in:       hookEvent("PreToolUse", "Bash", "toolu_01A", `{"command":"ls"}`),
			preload:  true,
			wantCode: hookBlock,
			wantStd:  "exists, which could run code in claude's tool hooks",
		},
		{
			name:     "BadArguments",
			in:       hookEvent("PreToolUse", "Bash", "toolu_01A", `{}`),
			args:     []string{"extra"},
			wantCode: hookBlock,
			wantStd:  "the audit hook is misconfigured",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &memAuditor{}
			if tc.fail {
				a.SetFailKind(entry.ToolCall)
			}
			sock := startGateway(t, a)
			if tc.noGateway {
				sock = filepath.Join(t.TempDir(), "gone.sock")
			}
			if tc.pre {
				pre := agentrun.ToolReport{Tool: "Bash", Decision: agentrun.DecisionRequested, Reason: reasonRequested, ArgsHash: lsHash, Phase: agentrun.PhasePre, CallID: "toolu_01A"}
				if err := agentrun.DialGateway(sock).Report(t.Context(), pre); err != nil {
					t.Fatal(err)
				}
			}
			if tc.env != "" {
				k, v, _ := strings.Cut(tc.env, "=")
				t.Setenv(k, v)
			}
			setPreloadFile(t, tc.preload)
			cfg := hookConfig{gateway: sock, tools: []string{"Bash", "Read"}, mcp: []string{"docs"}, secretEnvs: []string{"TOKEN"}, commands: []string{"ls", "echo *"}}
			// A short deadline: an unreachable gateway is retried until it.
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
			defer cancel()
			var stderr bytes.Buffer
			code := HookMain(ctx, append(cfg.args(), tc.args...), strings.NewReader(tc.in), &stderr)
			if code != tc.wantCode || !strings.Contains(stderr.String(), tc.wantStd) {
				t.Errorf("got exit %d, stderr %q; want %d, stderr containing %q", code, stderr.String(), tc.wantCode, tc.wantStd)
			}
			if strings.Contains(stderr.String(), hookSecret) {
				t.Error("the secret is in the hook's stderr")
			}
			if diff := cmp.Diff(tc.wantCalls, a.Calls()); diff != "" {
				t.Errorf("tool.call records (-want +got):\n%s", diff)
			}
		})
	}
}

// setPreloadFile points preloadFile at a file of the test's that exists when exists is
// true, so a test neither depends on nor touches the host's /etc/ld.so.preload.
func setPreloadFile(t *testing.T, exists bool) {
	t.Helper()
	old := preloadFile
	preloadFile = filepath.Join(t.TempDir(), "ld.so.preload")
	t.Cleanup(func() { preloadFile = old })
	if exists {
		if err := os.WriteFile(preloadFile, []byte("/tmp/x.so\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAuditCallID: an id the gateway would refuse becomes a stable stand-in, so a call's
// reports still pair up and are never refused for their id.
func TestAuditCallID(t *testing.T) {
	for _, id := range []string{"toolu_01ABC-x", "", "a/b", strings.Repeat("x", 129), "t\n1"} {
		got := agentrun.AuditCallID(id)
		if got != agentrun.AuditCallID(id) || got == "" || len(got) > 128 || strings.ContainsFunc(got, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-')
		}) {
			t.Errorf("auditCallID(%q) = %q", id, got)
		}
	}
	if agentrun.AuditCallID("toolu_01ABC") != "toolu_01ABC" {
		t.Error("a valid id was changed")
	}
}

// hookBinaries builds the worker program (claude's tool hook) and the fake claude into a
// fresh directory.
func hookBinaries(t *testing.T) (agora, claude string) {
	t.Helper()
	dir := t.TempDir()
	for _, b := range []struct{ out, pkg string }{
		{"agora", "github.com/agora-dev/agora/cmd/agora-worker"},
		{"claude", "github.com/agora-dev/agora/internal/runtime/claudert/internal/fakeclaude"},
	} {
		// make build's flags (-trimpath, CGO_ENABLED=0): its compiled packages serve.
		cmd := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(dir, b.out), b.pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", b.pkg, err, out)
		}
	}
	return filepath.Join(dir, "agora"), filepath.Join(dir, "claude")
}

// claudeInvocation is an invocation of the claude-code runtime running the fake claude in
// its tools mode with calls, against the gateway at sock.
func claudeInvocation(t *testing.T, sock, claude, calls string, grants grant.Set) (agentrun.Invocation, *bytes.Buffer) {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{wire.WorkspaceDir, wire.OutDir} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	stderr := &bytes.Buffer{}
	return agentrun.Invocation{
		Dir: filepath.Join(root, wire.WorkspaceDir),
		Env: []string{"PATH=" + filepath.Dir(claude) + ":/usr/bin:/bin", "HOME=" + t.TempDir(), "TOKEN=" + hookSecret,
			"FAKECLAUDE_MODE=tools", "FAKECLAUDE_TOOLS=" + calls},
		Stdout: &bytes.Buffer{}, Stderr: stderr, Timeout: time.Minute,
		DispatchID: "01JTESTDISPATCH", Role: "fixer@sha256:" + strings.Repeat("ab", 32),
		Grants: grants, Model: "test-model", Prompt: "go",
		Secrets: [][]byte{[]byte(hookSecret)},
		Out:     filepath.Join(root, wire.OutDir), Tmp: t.TempDir(), GatewaySocket: sock,
	}, stderr
}

// byCall groups tool.call records ("tool decision reason|phase|id|hash") by call id, each
// call's records in the log's order. A call's records are made on two paths: a hook process
// reports its phases as claude runs it, and the worker records what it reads from claude's
// output (a refusal claude made itself, a call of a tool that is not loaded). Each call's
// records keep their order (the pre report comes before the call runs), but on a loaded
// machine claude's output about one call can be read after the next call's hook has
// reported, so the log does not order two calls' records made on different paths.
func byCall(calls []string) map[string][]string {
	out := map[string][]string{}
	for _, c := range calls {
		f := strings.Split(c, "|")
		id := f[len(f)-2]
		out[id] = append(out[id], c)
	}
	return out
}

// TestClaude_HooksEndToEnd runs the claude-code runtime with the fake claude and the real
// agora binary as its hook: each call is on record with its id, its records in order; a hook that
// cannot reach the gateway blocks its call (the tool does not run); a claude whose hooks
// never run is stopped at the first call that ran unrecorded.
func TestClaude_HooksEndToEnd(t *testing.T) {
	agora, claude := hookBinaries(t)
	// "ls *" is granted without an exact Claude Code rule: the hook lets ls x go on and
	// claude's rules refuse it. rm is not granted, and "touch again; echo ..." is not one
	// simple command (claude's own rule, Bash(touch *), would have run it): the hook refuses both.
	calls := `[{"name":"Bash","input":{"command":"touch ran"}},` +
		`{"name":"Bash","input":{"command":"ls x"}},` +
		`{"name":"Bash","input":{"command":"rm -rf /"}},` +
		`{"name":"Write","input":{"file_path":"w","content":"x"}},` +
		`{"name":"Bash","input":{"command":"touch again; echo ` + hookSecret + `"}}]`
	grants := grant.Set{Tools: []string{"run_command"}, Commands: []string{"touch **", "ls *"}}
	hash := func(input string) string {
		return agentrun.ArgsHash(redact.New([][]byte{[]byte(hookSecret)}), json.RawMessage(input))
	}

	t.Run("Recorded", func(t *testing.T) {
		testOnlyHookProgram = agora
		defer func() { testOnlyHookProgram = "" }()
		a := &memAuditor{}
		inv, stderr := claudeInvocation(t, startGateway(t, a), claude, calls, grants)
		exit, err := Adapter{}.Run(t.Context(), inv)
		if err != nil || exit.Failure != "" {
			t.Fatalf("Run: %+v %v\nstderr:\n%s", exit, err, stderr)
		}
		want := []string{
			"Bash requested " + reasonRequested + `|pre|toolu_01FAKE000001|` + hash(`{"command":"touch ran"}`),
			"Bash allowed " + reasonRan + `|post|toolu_01FAKE000001|` + hash(`{"command":"touch ran"}`),
			"Bash requested " + reasonRequested + `|pre|toolu_01FAKE000002|` + hash(`{"command":"ls x"}`),
			"Bash denied " + reasonRuleDenied + `|post|toolu_01FAKE000002|` + hash(`{"command":"ls x"}`),
			"Bash denied " + reasonCommandNotGranted + `|pre|toolu_01FAKE000003|` + hash(`{"command":"rm -rf /"}`),
			"Write denied " + reasonNotLoaded + `|<nil>|toolu_01FAKE000004|` + hash(`{"content":"x","file_path":"`+filepath.Join(inv.Dir, "w")+`"}`), // claude's view: relative to its cwd
			"Bash denied " + reasonLineNotSimple + `|pre|toolu_01FAKE000005|` + hash(`{"command":"touch again; echo `+hookSecret+`"}`),
		}
		// Each call's records in order; two calls' records may interleave (byCall).
		if diff := cmp.Diff(byCall(want), byCall(a.Calls())); diff != "" {
			t.Errorf("tool.call records by call (-want +got):\n%s", diff)
		}
		if !exists(filepath.Join(inv.Dir, "ran")) {
			t.Error("the allowed call did not run")
		}
		if exists(filepath.Join(inv.Dir, "again")) {
			t.Error("the line with shell syntax ran")
		}
		if exists(filepath.Join(inv.Dir, "w")) {
			t.Error("the Write that is not loaded ran")
		}
	})

	t.Run("HookCannotReachTheGateway", func(t *testing.T) {
		// The hook is told of a socket that is not there; the worker reaches the gateway.
		wrapper := filepath.Join(t.TempDir(), "hook")
		script := "#!/bin/sh\nexec '" + agora + "' \"$@\" --gateway=" + filepath.Join(t.TempDir(), "gone.sock") + "\n"
		if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		testOnlyHookProgram = wrapper
		defer func() { testOnlyHookProgram = "" }()
		a := &memAuditor{}
		inv, stderr := claudeInvocation(t, startGateway(t, a), claude, `[{"name":"Bash","input":{"command":"touch ran"}}]`, grants)
		exit, err := Adapter{}.Run(t.Context(), inv)
		if err != nil || exit.Failure != "" {
			t.Fatalf("Run: %+v %v\nstderr:\n%s", exit, err, stderr)
		}
		if exists(filepath.Join(inv.Dir, "ran")) {
			t.Error("the call ran though its hook could not record it")
		}
		want := []string{"Bash denied " + reasonHookBlocked + `|<nil>|toolu_01FAKE000001|` + hash(`{"command":"touch ran"}`)}
		if diff := cmp.Diff(want, a.Calls()); diff != "" {
			t.Errorf("tool.call records (-want +got):\n%s", diff)
		}
	})

	t.Run("LoaderPreloadFile", func(t *testing.T) {
		// The dynamic loader would run code of its own in the shell that starts each hook:
		// claude is not started at all.
		testOnlyHookProgram = agora
		defer func() { testOnlyHookProgram = "" }()
		setPreloadFile(t, true)
		a := &memAuditor{}
		inv, _ := claudeInvocation(t, startGateway(t, a), claude, calls, grants)
		exit, err := Adapter{}.Run(t.Context(), inv)
		if err != nil || !strings.Contains(exit.Failure, "ld.so.preload exists") {
			t.Fatalf("Run: %+v %v, want a failure naming the preload file", exit, err)
		}
		if got := a.Calls(); len(got) != 0 || exists(filepath.Join(inv.Dir, "ran")) {
			t.Errorf("claude ran: tool.call records %q", got)
		}
	})

	t.Run("LoaderVariable", func(t *testing.T) {
		testOnlyHookProgram = agora
		defer func() { testOnlyHookProgram = "" }()
		a := &memAuditor{}
		inv, _ := claudeInvocation(t, startGateway(t, a), claude, calls, grants)
		inv.Env = append(inv.Env, "LD_PRELOAD=/tmp/x.so")
		exit, err := Adapter{}.Run(t.Context(), inv)
		if err != nil || !strings.Contains(exit.Failure, "the environment sets LD_PRELOAD") {
			t.Fatalf("Run: %+v %v, want a failure naming LD_PRELOAD", exit, err)
		}
		if got := a.Calls(); len(got) != 0 || exists(filepath.Join(inv.Dir, "ran")) {
			t.Errorf("claude ran: tool.call records %q", got)
		}
	})

	t.Run("HooksNeverRun", func(t *testing.T) {
		// A hook program that does nothing and exits 0, as if claude ran no hook at all.
		testOnlyHookProgram = "/bin/true"
		defer func() { testOnlyHookProgram = "" }()
		a := &memAuditor{}
		inv, _ := claudeInvocation(t, startGateway(t, a), claude, calls, grants)
		exit, err := Adapter{}.Run(t.Context(), inv)
		if err != nil || !strings.Contains(exit.Failure, "claude ran Bash without agora's pre-tool audit hook") {
			t.Fatalf("Run: %+v %v, want a failure naming the unrecorded call", exit, err)
		}
		// What claude did before it was stopped is recorded as it was; the first call is the
		// one that ran unrecorded.
		want := "Bash allowed " + reasonNoPreHook + `|<nil>|toolu_01FAKE000001|` + hash(`{"command":"touch ran"}`)
		if got := a.Calls(); len(got) == 0 || got[0] != want {
			t.Errorf("tool.call records %q, want the first to be %q", got, want)
		}
	})
}

// sseModel is a scripted Anthropic Messages API that streams, as the real claude asks: the
// nth request of the conversation (counted by its assistant turns) gets the nth reply's
// blocks, each {"type":"text","text"} or {"type":"tool_use","id","name","input"}.
func sseModel(t *testing.T, replies ...[]map[string]any) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Model    string           `json:"model"`
			Messages []map[string]any `json:"messages"`
			Tools    []any            `json:"tools"`
		}
		if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&body) != nil {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		turn := 0
		for _, m := range body.Messages {
			if m["role"] == "assistant" {
				turn++
			}
		}
		blocks := []map[string]any{{"type": "text", "text": "done"}}
		if len(body.Tools) > 0 && turn < len(replies) {
			blocks = replies[turn]
		}
		w.Header().Set("Content-Type", "text/event-stream")
		ev := func(typ string, d map[string]any) {
			d["type"] = typ
			b, _ := json.Marshal(d)
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b)
		}
		ev("message_start", map[string]any{"message": map[string]any{"id": fmt.Sprintf("msg_%d", turn), "type": "message",
			"role": "assistant", "model": body.Model, "content": []any{}, "stop_reason": nil, "stop_sequence": nil,
			"usage": map[string]any{"input_tokens": 10, "output_tokens": 1}}})
		stop := "end_turn"
		for i, b := range blocks {
			if b["type"] == "tool_use" {
				stop = "tool_use"
				in, _ := json.Marshal(b["input"])
				ev("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "tool_use", "id": b["id"], "name": b["name"], "input": map[string]any{}}})
				ev("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(in)}})
			} else {
				ev("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "text", "text": ""}})
				ev("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "text_delta", "text": b["text"]}})
			}
			ev("content_block_stop", map[string]any{"index": i})
		}
		ev("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 5}})
		ev("message_stop", map[string]any{})
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestClaude_RealCLI runs the same calls through the real Claude Code CLI, when one is
// given, against a scripted streaming Messages API and the real gateway: the entries must
// be exactly those the fake claude produces. Seen passing with Claude Code 2.1.197 and
// 2.1.330.
func TestClaude_RealCLI(t *testing.T) {
	real := anthropictest.RealClaude(filepath.Join("..", "..", "..", ".."))
	if real == "" {
		t.Skip("SKIP: the real claude CLI is not installed (run scripts/agent-clis.sh, or set AGORA_TEST_CLAUDE to a Claude Code binary) to check the hooks against it")
	}
	agora, _ := hookBinaries(t)
	tool := func(id, name, input string) []map[string]any {
		var in map[string]any
		if err := json.Unmarshal([]byte(input), &in); err != nil {
			t.Fatal(err)
		}
		return []map[string]any{{"type": "tool_use", "id": id, "name": name, "input": in}}
	}
	model := sseModel(t,
		tool("toolu_01AAA", "Bash", `{"command":"touch ran"}`),
		tool("toolu_01BBB", "Write", `{"file_path":"pwned","content":"x"}`),
		tool("toolu_01CCC", "Bash", `{"command":"mkdir build"}`),
		tool("toolu_01DDD", "Bash", `{"command":"touch nodir/x"}`),
		tool("toolu_01EEE", "Bash", `{"command":"rm -rf build"}`),
		tool("toolu_01FFF", "Bash", `{"command":"cat /etc/hostname"}`),
	)
	a := &memAuditor{}
	sock := filepath.Join(t.TempDir(), wire.GatewaySocket)
	gw, err := modelgw.Listen(t.Context(), sock, modelgw.Config{
		DispatchID: "01JTESTDISPATCH", Role: "fixer@sha256:" + strings.Repeat("ab", 32),
		ModelAPI: modelgw.APIAnthropic, ModelBaseURL: model, APIKey: []byte("sk-ant-test-0123456789abcdef"),
		Dialer: egress.NewDialer(egress.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}, nil),
		Audit:  a, RequestsPerSecond: 1000, RequestBurst: 1000,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	testOnlyHookProgram = agora
	defer func() { testOnlyHookProgram = "" }()
	// mkdir * has no exact Claude Code rule (claude's own rules refuse it); rm and cat are
	// not granted (the hook refuses them, though claude runs cat on its own).
	inv, stderr := claudeInvocation(t, sock, real, "", grant.Set{Tools: []string{"run_command"}, Commands: []string{"touch **", "mkdir *"}})
	inv.Model = "claude-sonnet-4-5"
	exit, err := Adapter{}.Run(t.Context(), inv)
	if err != nil || exit.Failure != "" {
		t.Fatalf("Run: %+v %v\nstderr:\n%s", exit, err, stderr)
	}
	var got []string
	for _, c := range a.Calls() {
		got = append(got, c[:strings.LastIndex(c, "|")]) // the hash is checked by the fake's test
	}
	want := []string{
		"Bash requested " + reasonRequested + "|pre|toolu_01AAA",
		"Bash allowed " + reasonRan + "|post|toolu_01AAA",
		"Write denied " + reasonNotLoaded + "|<nil>|toolu_01BBB",
		"Bash requested " + reasonRequested + "|pre|toolu_01CCC",
		"Bash denied " + reasonRuleDenied + "|post|toolu_01CCC",
		"Bash requested " + reasonRequested + "|pre|toolu_01DDD",
		"Bash error " + reasonFailed + "|post|toolu_01DDD",
		"Bash denied " + reasonCommandNotGranted + "|pre|toolu_01EEE",
		"Bash denied " + reasonCommandNotGranted + "|pre|toolu_01FFF",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tool.call records (-want +got):\n%s", diff)
	}
	if !exists(filepath.Join(inv.Dir, "ran")) || exists(filepath.Join(inv.Dir, "pwned")) {
		t.Error("the allowed call did not run, or the refused one did")
	}
}
