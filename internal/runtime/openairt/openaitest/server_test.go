package openaitest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const tools = `[{"type":"function","function":{"name":"read_file","description":"read","parameters":{"type":"object"}}}]`

// post sends body to the chat endpoint and returns the status and the body.
func post(t *testing.T, c *http.Client, url, body string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("post: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

func TestServer_RejectsInvalidRequests(t *testing.T) {
	user := `{"role":"user","content":"hi"}`
	call := `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"read_file","arguments":"{}"}}]}`
	tests := []struct {
		name, body, want string
	}{
		{"not JSON", `{"model":`, "could not parse the JSON body"},
		{"unknown field", `{"model":"m","messages":[` + user + `],"bogus":1}`, "Unrecognized request argument supplied: bogus"},
		{"no model", `{"messages":[` + user + `]}`, "you must provide a model parameter"},
		{"no messages", `{"model":"m","messages":[]}`, "too short - 'messages'"},
		{"bad role", `{"model":"m","messages":[{"role":"robot","content":"x"}]}`, "Invalid value: 'robot'"},
		{"user without content", `{"model":"m","messages":[{"role":"user"}]}`, "Missing required parameter: 'messages.[0].content'"},
		{"content of the wrong type", `{"model":"m","messages":[{"role":"user","content":7}]}`, "expected one of a string or array of objects"},
		{"tool without a call", `{"model":"m","messages":[` + user + `,{"role":"tool","tool_call_id":"call_1","content":"x"}]}`, "must be a response to a preceeding message with 'tool_calls'"},
		{"tool answering an unknown id", `{"model":"m","messages":[` + user + `,` + call + `,{"role":"tool","tool_call_id":"call_2","content":"x"}]}`, "must be a response to a preceeding message"},
		{"tool answering twice", `{"model":"m","messages":[` + user + `,` + call + `,{"role":"tool","tool_call_id":"call_1","content":"x"},{"role":"tool","tool_call_id":"call_1","content":"x"}]}`, "must be a response to a preceeding message"},
		{"call left unanswered", `{"model":"m","messages":[` + user + `,` + call + `,` + user + `]}`, "did not have response messages: call_1"},
		{"call unanswered at the end", `{"model":"m","messages":[` + user + `,` + call + `]}`, "did not have response messages: call_1"},
		{"tool without tool_call_id", `{"model":"m","messages":[` + user + `,` + call + `,{"role":"tool","content":"x"}]}`, "Missing required parameter: 'messages.[2].tool_call_id'"},
		{"arguments as an object", `{"model":"m","messages":[` + user + `,{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":{}}}]}]}`, "Invalid type for"},
		{"call without id", `{"model":"m","messages":[` + user + `,{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}"}}]}]}`, "tool_calls.[0].id"},
		{"assistant with nothing", `{"model":"m","messages":[` + user + `,{"role":"assistant","content":null}]}`, "messages.[1].content"},
		{"tool_choice without tools", `{"model":"m","messages":[` + user + `],"tool_choice":"auto"}`, "only allowed when 'tools' are specified"},
		{"bad tool_choice", `{"model":"m","messages":[` + user + `],"tools":` + tools + `,"tool_choice":"sometimes"}`, "Invalid value: 'sometimes'"},
		{"bad tool name", `{"model":"m","messages":[` + user + `],"tools":[{"type":"function","function":{"name":"read file"}}]}`, "does not match pattern"},
		{"parameters not an object", `{"model":"m","messages":[` + user + `],"tools":[{"type":"function","function":{"name":"f","parameters":"x"}}]}`, "expected an object"},
		{"stream_options without stream", `{"model":"m","messages":[` + user + `],"stream_options":{"include_usage":true}}`, "only allowed when 'stream' is enabled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := New(t, Say("unused"))
			status, _, body := post(t, srv.Client(), srv.URL(), tt.body)
			if status != http.StatusBadRequest {
				t.Fatalf("got status %d (%s), want 400", status, body)
			}
			var e struct {
				Error struct {
					Message, Type string
				}
			}
			if err := json.Unmarshal(body, &e); err != nil {
				t.Fatalf("error body %s: %v", body, err)
			}
			if !strings.Contains(e.Error.Message, tt.want) || e.Error.Type != "invalid_request_error" {
				t.Errorf("got error %+v, want a message containing %q", e.Error, tt.want)
			}
			reqs := srv.Requests()
			if len(reqs) != 1 || reqs[0].Rejected != e.Error.Message || len(srv.Accepted()) != 0 {
				t.Errorf("got recorded %+v, want one rejected request", reqs)
			}
			// The refused request did not use the step.
			ok := `{"model":"m","messages":[` + user + `]}`
			if status, _, body := post(t, srv.Client(), srv.URL(), ok); status != 200 || !bytes.Contains(body, []byte("unused")) {
				t.Errorf("got %d %s after a refusal, want the first step's reply", status, body)
			}
		})
	}
}

func TestServer_AcceptsAWellFormedConversation(t *testing.T) {
	body := `{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"hi"}]},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"read_file","arguments":"{}"}},{"id":"b","type":"function","function":{"name":"read_file","arguments":"{}"}}]},` +
		`{"role":"tool","tool_call_id":"b","content":"B"},{"role":"tool","tool_call_id":"a","content":[{"type":"text","text":"A"}]}],` +
		`"tools":` + tools + `,"tool_choice":"auto","temperature":0.2}`
	var got Request
	srv := New(t, Func(func(r Request) Reply { got = r; return Reply{Content: "fine"} }))
	status, _, resp := post(t, srv.Client(), srv.URL(), body)
	if status != 200 {
		t.Fatalf("got %d %s, want 200", status, resp)
	}
	if r, ok := got.Body.ToolResult("a"); !ok || r != "A" {
		t.Errorf("got tool result %q, %v for a; want A", r, ok)
	}
	if got.Body.Messages[1].Text() != "hi" || !cmp.Equal(got.Body.ToolNames(), []string{"read_file"}) {
		t.Errorf("got %+v", got.Body)
	}
}

func TestServer_JSONReply(t *testing.T) {
	srv := New(t, Func(func(Request) Reply {
		return Reply{Content: "thinking", ToolCalls: []Call{{Name: "read_file", Arguments: `{"path":"a"}`}}}
	}))
	status, h, body := post(t, srv.Client(), srv.URL(), `{"model":"gpt-x","messages":[{"role":"user","content":"hi"}],"tools":`+tools+`}`)
	if status != 200 || h.Get("Content-Type") != "application/json" {
		t.Fatalf("got %d %q", status, h.Get("Content-Type"))
	}
	var r struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		Model   string `json:"model"`
		Choices []struct {
			Index   int `json:"index"`
			Message struct {
				Role      string  `json:"role"`
				Content   *string `json:"content"`
				ToolCalls []struct {
					ID       string `json:"id"`
					Type     string `json:"type"`
					Function struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"` // a string, not an object
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int64 `json:"prompt_tokens"`
			CompletionTokens int64 `json:"completion_tokens"`
			TotalTokens      int64 `json:"total_tokens"`
		} `json:"usage"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	m := r.Choices[0].Message
	if r.Object != "chat.completion" || r.Model != "gpt-x" || !strings.HasPrefix(r.ID, "chatcmpl-") || r.Created == 0 ||
		m.Role != "assistant" || m.Content == nil || *m.Content != "thinking" || r.Choices[0].FinishReason != "tool_calls" {
		t.Errorf("got %s", body)
	}
	if len(m.ToolCalls) != 1 || m.ToolCalls[0].Type != "function" || !strings.HasPrefix(m.ToolCalls[0].ID, "call_") ||
		m.ToolCalls[0].Function.Name != "read_file" || m.ToolCalls[0].Function.Arguments != `{"path":"a"}` {
		t.Errorf("got tool calls %+v", m.ToolCalls)
	}
	if r.Usage.PromptTokens != 10 || r.Usage.TotalTokens != r.Usage.PromptTokens+r.Usage.CompletionTokens {
		t.Errorf("got usage %+v, want 10 prompt tokens for one message and a consistent total", r.Usage)
	}
}

// streamEvents reads an SSE body into its data payloads.
func streamEvents(t *testing.T, body []byte) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("line %q is not a data line", line)
		}
		out = append(out, data)
	}
	return out
}

func TestServer_StreamReply(t *testing.T) {
	const args = `{"path":"notes/ünïcode.txt","n":12}`
	for _, includeUsage := range []bool{false, true} {
		t.Run("include_usage="+map[bool]string{false: "false", true: "true"}[includeUsage], func(t *testing.T) {
			srv := New(t, Func(func(Request) Reply {
				return Reply{Content: "let me look", ToolCalls: []Call{{Name: "read_file", Arguments: args}, {Name: "read_file", Arguments: "{}"}}}
			}))
			opts := ""
			if includeUsage {
				opts = `,"stream_options":{"include_usage":true}`
			}
			status, h, body := post(t, srv.Client(), srv.URL(), `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":`+tools+`,"stream":true`+opts+`}`)
			if status != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/event-stream") {
				t.Fatalf("got %d %q", status, h.Get("Content-Type"))
			}
			events := streamEvents(t, body)
			if events[len(events)-1] != "[DONE]" {
				t.Fatalf("last event %q, want [DONE]", events[len(events)-1])
			}
			var content strings.Builder
			argsBy := map[int]*strings.Builder{}
			argChunks, usageChunks := 0, 0
			var finish string
			for _, e := range events[:len(events)-1] {
				var c struct {
					Object  string          `json:"object"`
					Usage   json.RawMessage `json:"usage"`
					Choices []struct {
						Delta struct {
							Content   *string `json:"content"`
							ToolCalls []struct {
								Index    int    `json:"index"`
								ID       string `json:"id"`
								Function struct {
									Name      string  `json:"name"`
									Arguments *string `json:"arguments"`
								} `json:"function"`
							} `json:"tool_calls"`
						} `json:"delta"`
						FinishReason *string `json:"finish_reason"`
					} `json:"choices"`
				}
				if err := json.Unmarshal([]byte(e), &c); err != nil {
					t.Fatalf("chunk %s: %v", e, err)
				}
				if c.Object != "chat.completion.chunk" {
					t.Errorf("got object %q", c.Object)
				}
				if len(c.Choices) == 0 {
					usageChunks++
					if !bytes.Contains(c.Usage, []byte(`"total_tokens"`)) {
						t.Errorf("usage chunk %s has no usage", e)
					}
					continue
				}
				if includeUsage != (string(c.Usage) == "null") {
					t.Errorf("chunk %s: usage %q with include_usage=%v", e, c.Usage, includeUsage)
				}
				d := c.Choices[0].Delta
				if d.Content != nil {
					content.WriteString(*d.Content)
				}
				for _, tc := range d.ToolCalls {
					if argsBy[tc.Index] == nil {
						if tc.ID == "" || tc.Function.Name != "read_file" {
							t.Errorf("first delta of call %d lacks id or name: %s", tc.Index, e)
						}
						argsBy[tc.Index] = &strings.Builder{}
					} else if tc.ID != "" || tc.Function.Name != "" {
						t.Errorf("id or name repeated in a later delta: %s", e)
					}
					if tc.Function.Arguments != nil && *tc.Function.Arguments != "" {
						argChunks++
						if !utf8.ValidString(*tc.Function.Arguments) {
							t.Errorf("fragment %q is not valid UTF-8", *tc.Function.Arguments)
						}
						argsBy[tc.Index].WriteString(*tc.Function.Arguments)
					}
				}
				if f := c.Choices[0].FinishReason; f != nil {
					finish = *f
				}
			}
			if content.String() != "let me look" || argsBy[0].String() != args || argsBy[1].String() != "{}" || finish != "tool_calls" {
				t.Errorf("reassembled %q, %q, %q, finish %q", content.String(), argsBy[0], argsBy[1], finish)
			}
			if argChunks < 5 {
				t.Errorf("arguments came in %d fragments, want them split", argChunks)
			}
			if want := map[bool]int{false: 0, true: 1}[includeUsage]; usageChunks != want {
				t.Errorf("got %d usage chunks, want %d", usageChunks, want)
			}
		})
	}
}

func TestPieces(t *testing.T) {
	for _, s := range []string{"", "a", `{"path":"a\"b"}`, "日本語のテキストです", strings.Repeat("x", 100)} {
		ps := pieces(s)
		if strings.Join(ps, "") != s {
			t.Errorf("pieces(%q) = %q, does not rejoin", s, ps)
		}
		for _, p := range ps {
			if p == "" || !utf8.ValidString(p) {
				t.Errorf("pieces(%q) has bad piece %q", s, p)
			}
		}
		if len(s) > 3 && len(ps) < 2 {
			t.Errorf("pieces(%q) did not split", s)
		}
	}
}

func TestServer_ScriptOrderRepeatAndExhaustion(t *testing.T) {
	srv := New(t, Say("one"), Repeat(Say("again")))
	ok := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	for i, want := range []string{"one", "again", "again", "again"} {
		if _, _, body := post(t, srv.Client(), srv.URL(), ok); !bytes.Contains(body, []byte(`"`+want+`"`)) {
			t.Errorf("request %d: got %s, want %q", i, body, want)
		}
	}
	if n := len(srv.Accepted()); n != 4 {
		t.Errorf("got %d accepted requests, want 4", n)
	}

	fake := &recordingTB{TB: t}
	short := New(fake, Say("only"))
	post(t, short.Client(), short.URL(), ok)
	status, _, _ := post(t, short.Client(), short.URL(), ok)
	if n := fake.count(); status != 500 || n != 1 {
		t.Errorf("got status %d and %d test errors beyond the script, want 500 and one", status, n)
	}
}

// recordingTB records Errorf calls instead of failing.
type recordingTB struct {
	testing.TB
	mu     sync.Mutex
	errors []string
}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, format)
}

func (r *recordingTB) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.errors)
}

func TestServer_LoopCallsTheFirstTool(t *testing.T) {
	srv := New(t, Loop())
	for range 3 {
		_, _, body := post(t, srv.Client(), srv.URL(), `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":`+tools+`}`)
		if !bytes.Contains(body, []byte(`"name":"read_file"`)) || !bytes.Contains(body, []byte(`"finish_reason":"tool_calls"`)) {
			t.Errorf("got %s, want a read_file call", body)
		}
	}
}

func TestServer_ErrorsAndHeaders(t *testing.T) {
	srv := New(t, Func(func(Request) Reply {
		return Reply{Status: 429, Message: "Rate limit reached", Header: http.Header{"Retry-After": {"2"}}}
	}))
	status, h, body := post(t, srv.Client(), srv.URL(), `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	if status != 429 || h.Get("Retry-After") != "2" || !bytes.Contains(body, []byte(`"message":"Rate limit reached"`)) {
		t.Errorf("got %d %v %s", status, h, body)
	}
	status, _, body = post(t, srv.Client(), srv.URL()+"/nope", `{}`)
	if status != 404 || !bytes.Contains(body, []byte("Invalid URL (POST /v1/nope/chat/completions)")) {
		t.Errorf("got %d %s for an unknown path", status, body)
	}
}

func TestServer_RequireAPIKey(t *testing.T) {
	srv := New(t, Say("in"))
	srv.RequireAPIKey("sk-test")
	ok := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	if status, _, body := post(t, srv.Client(), srv.URL(), ok); status != 401 || !bytes.Contains(body, []byte("didn't provide an API key")) {
		t.Errorf("got %d %s without a key, want 401", status, body)
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL()+"/chat/completions", strings.NewReader(ok))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-test")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("got %d with the key, want 200", resp.StatusCode)
	}
	if got := srv.Accepted()[0].Header.Get("Authorization"); got != "Bearer sk-test" {
		t.Errorf("recorded Authorization %q", got)
	}
}

func TestServer_ServeUnix(t *testing.T) {
	srv := New(t, Say("over the socket"))
	sock := filepath.Join(t.TempDir(), "m.sock")
	srv.ServeUnix(sock)
	status, _, body := post(t, UnixClient(t, sock), UnixBaseURL, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	if status != 200 || !bytes.Contains(body, []byte("over the socket")) {
		t.Errorf("got %d %s", status, body)
	}
}
