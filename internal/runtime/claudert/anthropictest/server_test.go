package anthropictest

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func post(t *testing.T, s *Server, key, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, s.URL+"/v1/messages", strings.NewReader(body))
	req.Header.Set("X-Api-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestServer_Stream(t *testing.T) {
	s, err := Start("k", Turns(Reply{Blocks: []Block{Text("héllo there"), ToolUse("toolu_1", "Write", `{"file_path":"a","content":"b"}`)},
		Usage: Usage{InputTokens: 7, OutputTokens: 3}}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	resp := post(t, s, "k", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"Write"}]}`)
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	var kinds []string
	var text, input string
	var stop string
	var out int
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type  string `json:"type"`
			Delta struct {
				Type, Text, PartialJSON, StopReason string
			} `json:"delta"`
			Usage *Usage `json:"usage"`
		}
		if err := json.Unmarshal([]byte(strings.ReplaceAll(strings.ReplaceAll(data, `"partial_json"`, `"partialjson"`), `"stop_reason"`, `"stopreason"`)), &ev); err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, ev.Type)
		text += ev.Delta.Text
		input += ev.Delta.PartialJSON
		if ev.Delta.StopReason != "" {
			stop, out = ev.Delta.StopReason, ev.Usage.OutputTokens
		}
	}
	got := strings.Join(kinds, ",")
	want := "message_start,ping,content_block_start,content_block_delta,content_block_delta,content_block_delta,content_block_stop," +
		"content_block_start,content_block_delta,content_block_delta,content_block_delta,content_block_stop,message_delta,message_stop"
	if got != want {
		t.Errorf("events %s\nwant   %s", got, want)
	}
	if text != "héllo there" || input != `{"file_path":"a","content":"b"}` || stop != "tool_use" || out != 3 {
		t.Errorf("text %q input %q stop %q output tokens %d", text, input, stop, out)
	}
	if r := s.Requests(); len(r) != 1 || r[0].Turn != 0 || !r[0].Stream || r[0].Tools[0] != "Write" {
		t.Errorf("requests %+v", r)
	}
}

func TestServer_JSONAndErrors(t *testing.T) {
	s, err := Start("k", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	resp := post(t, s, "k", `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"x"},{"role":"user","content":"y"}]}`)
	var msg struct {
		Type, StopReason string
		Content          []Block
		Usage            Usage
	}
	json.NewDecoder(resp.Body).Decode(&msg)
	if resp.StatusCode != 200 || msg.Type != "message" || len(msg.Content) != 1 || msg.Content[0].Text != "done" || msg.Usage.InputTokens != 100 {
		t.Errorf("JSON reply %d %+v", resp.StatusCode, msg)
	}
	if r := s.Requests(); r[0].Turn != 1 {
		t.Errorf("turn = %d, want 1", r[0].Turn)
	}
	for _, tc := range []struct {
		key, body string
		status    int
		typ       string
	}{
		{"wrong", `{"model":"m","messages":[{"role":"user","content":"x"}]}`, 401, "authentication_error"},
		{"k", `not json`, 400, "invalid_request_error"},
	} {
		resp := post(t, s, tc.key, tc.body)
		var e struct {
			Type  string
			Error struct{ Type string }
		}
		json.NewDecoder(resp.Body).Decode(&e)
		if resp.StatusCode != tc.status || e.Type != "error" || e.Error.Type != tc.typ {
			t.Errorf("%s: %d %+v, want %d %s", tc.body, resp.StatusCode, e, tc.status, tc.typ)
		}
	}
}

// TestServer_RealClaude drives the real CLI against the fake, unsandboxed: it must stream,
// run the scripted Write and end with the scripted answer. This is what keeps the fake
// faithful.
func TestServer_RealClaude(t *testing.T) {
	claude := RealClaude("../../../..")
	if claude == "" {
		t.Skip("SKIP: the real claude CLI is not installed (run scripts/agent-clis.sh or set AGORA_TEST_CLAUDE)")
	}
	s, err := Start("sk-ant-fake-key-0123456789abcdef", Turns(
		Reply{Blocks: []Block{Text("Writing."), ToolUse("toolu_01W", "Write", `{"file_path":"notes.md","content":"from the fake"}`)}},
		Reply{Blocks: []Block{Text("All written.")}},
	))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	dir, home := t.TempDir(), t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, claude, "--print", "--output-format=stream-json", "--verbose", "--model=claude-sonnet-4-5",
		"--permission-mode=dontAsk", "--allowedTools=Write", "--setting-sources=", "write the notes")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + home, "ANTHROPIC_BASE_URL=" + s.URL,
		"ANTHROPIC_API_KEY=sk-ant-fake-key-0123456789abcdef", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("claude: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "notes.md")); err != nil || string(b) != "from the fake" {
		t.Errorf("notes.md = %q, %v", b, err)
	}
	if !strings.Contains(string(out), `"result":"All written."`) {
		t.Errorf("no final result in claude's output:\n%s", out)
	}
	streamed := 0
	for _, r := range s.Requests() {
		if r.Path == "/v1/messages" && r.Stream {
			streamed++
		}
	}
	if streamed < 2 {
		t.Errorf("claude streamed %d requests, want at least 2: %+v", streamed, s.Requests())
	}
}
