package codexadapter

import (
	"bufio"
	"bytes"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/egress"
	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/modelgw"
	"github.com/agora-dev/agora/internal/runtime/agentrun"
	"github.com/agora-dev/agora/internal/runtime/codexrt"
	"github.com/agora-dev/agora/internal/runtime/codexrt/responsestest"
	"github.com/agora-dev/agora/internal/worker/wire"
)

const codexTestKey = "sk-codex-real-key-0123456789abcdef"

// fakeCodexScript stands in for codex: it reads its prompt, makes one real Responses call
// through the base URL and token its config names (the worker's relay, then the gateway),
// checks the token has left the config once answered, then prints the JSON Lines in $FAKECODEX_STREAM, running `touch ran` first when
// FAKECODEX_TOUCH is set, and sleeps when FAKECODEX_HANG is set (until it is killed).
const fakeCodexScript = `#!/bin/sh
cat >/dev/null
conf="$CODEX_HOME/config.toml"
grep -q '^sandbox_mode = "danger-full-access"$' "$conf" || { echo "config lacks sandbox_mode" >&2; exit 5; }
base=$(sed -n 's/^base_url = "\(.*\)"$/\1/p' "$conf")
tok=$(sed -n 's/^experimental_bearer_token = "\(.*\)"$/\1/p' "$conf")
curl -sS -N -H "Authorization: Bearer $tok" -H 'Content-Type: application/json' \
  -d '{"model":"gpt-5.5","stream":true,"input":"hi"}' "$base/responses" > "$CODEX_HOME/../sse" || exit 3
grep -q '^event: response.completed' "$CODEX_HOME/../sse" || { cat "$CODEX_HOME/../sse" >&2; exit 4; }
! grep -q "$tok" "$conf" || { echo "the relay token is still in config.toml after the first answer" >&2; exit 6; }
env > "$FAKECODEX_ENVOUT"
[ -n "$FAKECODEX_TOUCH" ] && touch ran
cat "$FAKECODEX_STREAM"
[ -n "$FAKECODEX_HANG" ] && exec sleep 60
exit 0
`

// startCodexGateway runs the real gateway for an OpenAI endpoint (the Responses fake).
func startCodexGateway(t *testing.T, a *memAuditor) (string, *responsestest.Server) {
	t.Helper()
	fake, err := responsestest.Start(codexTestKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Close() })
	return startGatewayAt(t, a, fake.URL), fake
}

func codexInvocation(t *testing.T, sock, stream string, grants grant.Set, extra ...string) (agentrun.Invocation, *bytes.Buffer, string) {
	t.Helper()
	if _, err := os.Stat("/usr/bin/curl"); err != nil {
		t.Skip("SKIP: the fake codex needs /usr/bin/curl to call the model through the relay")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "codex")
	if err := os.WriteFile(bin, []byte(fakeCodexScript), 0o755); err != nil {
		t.Fatal(err)
	}
	streamFile := filepath.Join(dir, "stream.jsonl")
	if err := os.WriteFile(streamFile, []byte(stream), 0o600); err != nil {
		t.Fatal(err)
	}
	envOut := filepath.Join(dir, "env")
	root := t.TempDir()
	for _, d := range []string{wire.WorkspaceDir, wire.OutDir} {
		os.MkdirAll(filepath.Join(root, d), 0o755)
	}
	stderr := &bytes.Buffer{}
	return agentrun.Invocation{
		Dir: filepath.Join(root, wire.WorkspaceDir),
		Env: append([]string{"PATH=/usr/bin:/bin", "HOME=" + t.TempDir(), "TOKEN=" + testSecret,
			"FAKECODEX_STREAM=" + streamFile, "FAKECODEX_ENVOUT=" + envOut}, extra...),
		Stdout: &bytes.Buffer{}, Stderr: stderr, Timeout: time.Minute,
		DispatchID: "01JTESTDISPATCH", Role: "fixer@sha256:" + strings.Repeat("ab", 32),
		Grants: grants, Model: "gpt-5.5", Prompt: "go", SystemPrompt: "be terse",
		Secrets: [][]byte{[]byte(testSecret)}, Binary: bin,
		Out: filepath.Join(root, wire.OutDir), Tmp: t.TempDir(), GatewaySocket: sock,
	}, stderr, envOut
}

func jsonl(lines ...string) string { return strings.Join(lines, "\n") + "\n" }

// TestCodex_AuditsLive: each command codex starts is checked and recorded; the answer is the
// last agent message; the model call went through the relay and the gateway with the host's
// key, which codex's environment never held.
func TestCodex_AuditsLive(t *testing.T) {
	a := &memAuditor{}
	sock, fake := startCodexGateway(t, a)
	stream := jsonl(
		`{"type":"thread.started","thread_id":"t1"}`,
		`{"type":"turn.started"}`,
		`{"type":"item.started","item":{"id":"item_0","type":"command_execution","command":"/bin/bash -lc 'touch ran'","aggregated_output":"","exit_code":null,"status":"in_progress"}}`,
		`{"type":"item.completed","item":{"id":"item_0","type":"command_execution","command":"/bin/bash -lc 'touch ran'","aggregated_output":"","exit_code":0,"status":"completed"}}`,
		`{"type":"item.completed","item":{"id":"item_1","type":"file_change","changes":[{"path":"notes.md","kind":"add"}],"status":"completed"}}`,
		`{"type":"item.completed","item":{"id":"item_2","type":"agent_message","text":"all done"}}`,
		`{"type":"turn.completed","usage":{"input_tokens":200,"cached_input_tokens":0,"output_tokens":20,"reasoning_output_tokens":0}}`)
	inv, stderr, envOut := codexInvocation(t, sock, stream, grant.Set{Tools: []string{"run_command", "write_file"}, Commands: []string{"touch *"}}, "FAKECODEX_TOUCH=1")
	exit, err := Adapter{}.Run(t.Context(), inv)
	if err != nil || exit.Failure != "" || exit.Final == nil || *exit.Final != "all done" {
		t.Fatalf("Run: %+v %v\nstderr:\n%s", exit, err, stderr)
	}
	calls := a.Calls()
	if len(calls) != 2 || !strings.HasPrefix(calls[0], "exec_command allowed ") || !strings.Contains(calls[0], "|item_0|sha256:") ||
		!strings.HasPrefix(calls[1], "apply_patch allowed ") {
		t.Errorf("tool.call records %q, want exec_command then apply_patch allowed", calls)
	}
	reqs := fake.Requests()
	if len(reqs) != 1 || reqs[0].Rejected != "" || reqs[0].Header.Get("Authorization") != "Bearer "+codexTestKey {
		t.Fatalf("model requests %+v, want one with the host's key", reqs)
	}
	env, err := os.ReadFile(envOut)
	if err != nil {
		t.Fatal(err)
	}
	// The relay token reaches codex in its config only, never its environment,
	// which every process codex starts inherits (and which the agent's tools can read).
	if strings.Contains(string(env), codexTestKey) || strings.Contains(string(env), "agora-relay-") || strings.Contains(string(env), codexrt.EnvKey) {
		t.Errorf("codex's environment holds the key or the relay token:\n%s", env)
	}
	if !strings.Contains(stderr.String(), "codex: turn usage 200 input") {
		t.Errorf("usage not reported:\n%s", stderr)
	}
}

// TestCodex_CommandOutsideGrantFailsClosed: codex cannot ask first, so an action outside the
// grant that codex reports kills codex, is recorded as what it was, ran-outside-grant (codex
// had started it; "denied" would say it never ran), and fails the dispatch
// saying why.
func TestCodex_CommandOutsideGrantFailsClosed(t *testing.T) {
	for _, tc := range []struct {
		name, item, tool, want string
		grants                 grant.Set
	}{
		{"command", `{"id":"item_0","type":"command_execution","command":"/bin/bash -lc 'touch a; rm -rf /'","status":"in_progress"}`, "exec_command", "outside the grant",
			grant.Set{Tools: []string{"run_command"}, Commands: []string{"touch *"}}},
		{"no run_command", `{"id":"item_0","type":"command_execution","command":"/bin/bash -lc 'touch a'","status":"in_progress"}`, "exec_command", "no run_command",
			grant.Set{Commands: []string{"touch *"}}},
		{"patch outside workspace", `{"id":"item_0","type":"file_change","changes":[{"path":"/etc/passwd","kind":"update"}],"status":"completed"}`, "apply_patch", "outside the workspace",
			grant.Set{Tools: []string{"write_file"}}},
		{"mcp", `{"id":"item_0","type":"mcp_tool_call","server":"s","tool":"t","status":"completed"}`, "mcp_tool_call", "does not configure",
			grant.Set{Tools: []string{"run_command"}}},
		{"a line agora cannot read", `{"id":"item_0","type":"command_execution","command":"/usr/bin/bash -lc \"touch a","status":"in_progress"}`, "exec_command", "cannot read exactly",
			grant.Set{Tools: []string{"run_command"}, Commands: []string{"bash -lc *"}}},
		{"a script outside a narrower grant", `{"id":"item_0","type":"command_execution","command":"/usr/bin/bash -lc \"printf '%s\\\\n' 'LINE' > NOTES.md && cat NOTES.md\"","status":"in_progress"}`, "exec_command", "outside the grant",
			grant.Set{Tools: []string{"run_command"}, Commands: []string{"printf **", "cat **"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &memAuditor{}
			sock, _ := startCodexGateway(t, a)
			ev := "item.started"
			if !strings.Contains(tc.item, "command_execution") {
				ev = "item.completed"
			}
			stream := jsonl(`{"type":"turn.started"}`, `{"type":"`+ev+`","item":`+tc.item+`}`)
			inv, stderr, _ := codexInvocation(t, sock, stream, tc.grants, "FAKECODEX_HANG=1")
			start := time.Now()
			exit, err := Adapter{}.Run(t.Context(), inv)
			if err != nil || !strings.Contains(exit.Failure, tc.want) || exit.Final != nil {
				t.Fatalf("Run: %+v %v, want a failure saying %q\nstderr:\n%s", exit, err, tc.want, stderr)
			}
			if d := time.Since(start); d > 30*time.Second {
				t.Errorf("codex ran on for %s after the refusal", d)
			}
			calls := a.Calls()
			if len(calls) != 1 || !strings.HasPrefix(calls[0], tc.tool+" ran-outside-grant ") {
				t.Errorf("tool.call records %q, want one %s ran-outside-grant", calls, tc.tool)
			}
		})
	}
}

// TestCodex_PatchThroughSymlinkFailsClosed: codex follows a symlink in the workspace (the
// real CLI does: its file_change then names the path inside the workspace), so a change
// whose path is inside but resolves outside is recorded ran-outside-grant (codex applied it)
// and fails the dispatch.
func TestCodex_PatchThroughSymlinkFailsClosed(t *testing.T) {
	a := &memAuditor{}
	sock, _ := startCodexGateway(t, a)
	stream := jsonl(`{"type":"turn.started"}`,
		`{"type":"item.completed","item":{"id":"item_0","type":"file_change","changes":[{"path":"link/x.txt","kind":"add"}],"status":"completed"}}`)
	inv, stderr, _ := codexInvocation(t, sock, stream, grant.Set{Tools: []string{"write_file"}}, "FAKECODEX_HANG=1")
	if err := os.Symlink(t.TempDir(), filepath.Join(inv.Dir, "link")); err != nil {
		t.Fatal(err)
	}
	exit, err := Adapter{}.Run(t.Context(), inv)
	if err != nil || !strings.Contains(exit.Failure, "resolves outside the workspace through a symlink") {
		t.Fatalf("Run: %+v %v, want the change refused\nstderr:\n%s", exit, err, stderr)
	}
	if calls := a.Calls(); len(calls) != 1 || !strings.HasPrefix(calls[0], "apply_patch ran-outside-grant ") {
		t.Errorf("tool.call records %q, want apply_patch ran-outside-grant", calls)
	}
	for _, tc := range []struct {
		path string
		want bool
	}{{filepath.Join(inv.Dir, "new", "deep", "x.txt"), true}, {filepath.Join(inv.Dir, "link", "gone", "x"), false}, {filepath.Join(inv.Dir, "link"), false}} {
		if _, got := agentrun.ResolvedRel(inv.Dir, tc.path); got != tc.want {
			t.Errorf("resolvesInside(%s) = %v, want %v", tc.path, got, tc.want)
		}
	}
}

// TestCodexRelay_OnlyResponses: the relay forwards only /model/responses, only with its token.
func TestCodexRelay_OnlyResponses(t *testing.T) {
	sock, fake := startCodexGateway(t, &memAuditor{})
	gw := agentrun.DialGateway(sock)
	defer gw.Close()
	rl, err := startCodexRelay(gw, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rl.Close()
	post := func(path, tok string) int {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, strings.TrimSuffix(rl.URL, "/model")+path, strings.NewReader(`{"model":"m","input":"x"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if s := post("/model/responses", "wrong"); s != http.StatusUnauthorized {
		t.Errorf("wrong token: %d", s)
	}
	if s := post("/model/chat/completions", rl.Token); s != http.StatusNotFound {
		t.Errorf("chat route: %d", s)
	}
	if s := post("/anthropic/v1/messages", rl.Token); s != http.StatusNotFound {
		t.Errorf("anthropic route: %d", s)
	}
	if s := post("/model/responses", rl.Token); s != http.StatusOK {
		t.Errorf("responses: %d", s)
	}
	if n := len(fake.Requests()); n != 1 {
		t.Errorf("fake got %d requests, want 1", n)
	}
}

// startGatewayAt runs the real gateway for the OpenAI endpoint at base.
func startGatewayAt(t *testing.T, a *memAuditor, base string) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), wire.GatewaySocket)
	gw, err := modelgw.Listen(t.Context(), sock, modelgw.Config{
		DispatchID: "01JTESTDISPATCH", Role: "fixer@sha256:" + strings.Repeat("ab", 32),
		ModelAPI: modelgw.APIOpenAI, ModelBaseURL: base, APIKey: []byte(codexTestKey),
		Dialer: egress.NewDialer(egress.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}, nil),
		Audit:  a, RequestsPerSecond: 1000, RequestBurst: 1000,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	return sock
}

func bufioReader(s string) *bufio.Reader { return bufio.NewReader(strings.NewReader(s)) }
