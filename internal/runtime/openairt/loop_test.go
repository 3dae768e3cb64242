package openairt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/runtime/openairt/openaitest"
	"github.com/google/go-cmp/cmp"
)

var modes = []struct {
	name   string
	stream bool
}{{"json", false}, {"stream", true}}

func TestRun_CallsGrantedToolAndFeedsResultBack(t *testing.T) {
	results := map[bool]Result{}
	conversations := map[bool][]openaitest.Message{}
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			srv := openaitest.New(t,
				openaitest.CallTool("read_file", `{"path":"notes/ünï.txt"}`),
				openaitest.Func(func(req openaitest.Request) openaitest.Reply {
					last := req.Body.Messages[len(req.Body.Messages)-1]
					if last.Role != "tool" || last.Text() != "contents of notes/ünï.txt" {
						t.Errorf("the model got %+v last, want the tool result", last)
					}
					return openaitest.Reply{Content: "The file says hello."}
				}),
			)
			tools := readTools()
			var tr bytes.Buffer
			cfg := config(srv, mode.stream)
			cfg.Transcript = &tr
			res, err := Run(t.Context(), cfg, tools, "Summarize notes.")
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if diff := cmp.Diff([]gotCall{{"read_file", `{"path":"notes/ünï.txt"}`}}, tools.got()); diff != "" {
				t.Errorf("tool calls (-want +got):\n%s", diff)
			}
			// Default usage: 10 prompt tokens per message (2, then 4), completion 1 + bytes/4.
			want := Result{Final: "The file says hello.", Turns: 2, PromptTokens: 60, CompletionTokens: 1 + (9+26)/4 + 1 + 20/4}
			if diff := cmp.Diff(want, res); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			reqs := srv.Accepted()
			if len(reqs) != 2 {
				t.Fatalf("got %d requests, want 2", len(reqs))
			}
			first := reqs[0].Body
			if first.Model != "test-model" || string(first.ToolChoice) != `"auto"` || !cmp.Equal(first.ToolNames(), []string{"read_file", "ask_human"}) {
				t.Errorf("first request: model %q, tool_choice %s, tools %v", first.Model, first.ToolChoice, first.ToolNames())
			}
			if string(first.Tools[1].Function.Parameters) != `{"type":"object","properties":{}}` {
				t.Errorf("a tool without parameters got %s, want an empty object schema", first.Tools[1].Function.Parameters)
			}
			if first.Streaming() != mode.stream || (mode.stream && (first.StreamOptions == nil || !first.StreamOptions.IncludeUsage)) {
				t.Errorf("stream %v, stream_options %+v; want stream=%v with usage", first.Streaming(), first.StreamOptions, mode.stream)
			}
			second := reqs[1].Body.Messages
			roles := []string{}
			for _, m := range second {
				roles = append(roles, m.Role)
			}
			if diff := cmp.Diff([]string{"system", "user", "assistant", "tool"}, roles); diff != "" {
				t.Errorf("roles (-want +got):\n%s", diff)
			}
			if second[2].ToolCalls[0].ID != second[3].ToolCallID || string(second[2].Content) != "null" {
				t.Errorf("assistant %+v and tool %+v do not pair", second[2], second[3])
			}
			assertNoAuthorization(t, srv)

			evs := transcriptEvents(t, tr.Bytes())
			wantTypes := []string{"system", "user", "request", "assistant", "tool_call", "tool_result", "request", "assistant", "final"}
			if diff := cmp.Diff(wantTypes, eventTypes(evs)); diff != "" {
				t.Errorf("transcript events (-want +got):\n%s", diff)
			}
			call := evs[4]
			if call["name"] != "read_file" || call["arguments"] != `{"path":"notes/ünï.txt"}` || call["id"] == "" {
				t.Errorf("tool_call event %v", call)
			}
			if calls, _ := evs[3]["tool_calls"].([]any); len(calls) != 1 {
				t.Errorf("assistant event %v lacks its tool call", evs[3])
			}
			if evs[5]["content"] != "contents of notes/ünï.txt" || evs[8]["content"] != "The file says hello." {
				t.Errorf("tool_result %v, final %v", evs[5], evs[8])
			}
			for _, e := range evs {
				if _, err := time.Parse(time.RFC3339Nano, e["time"].(string)); err != nil {
					t.Errorf("event %v: bad time: %v", e, err)
				}
			}
			results[mode.stream] = res
			for _, m := range second {
				m.ToolCalls = nil // ids differ between servers
				m.ToolCallID = ""
				conversations[mode.stream] = append(conversations[mode.stream], m)
			}
		})
	}
	if diff := cmp.Diff(results[false], results[true]); diff != "" {
		t.Errorf("stream and JSON results differ (-json +stream):\n%s", diff)
	}
	if diff := cmp.Diff(conversations[false], conversations[true]); diff != "" {
		t.Errorf("stream and JSON conversations differ (-json +stream):\n%s", diff)
	}
}

func TestRun_StreamAndJSONAgreeOnAComplexReply(t *testing.T) {
	reply := openaitest.Reply{
		Content: "Reading two files: \"a\" and 日本.",
		ToolCalls: []openaitest.Call{
			{Name: "read_file", Arguments: `{"path":"a\"quoted\\name.txt"}`},
			{Name: "read_file", Arguments: `{"path":"日本/語.md"}`},
		},
		Usage: &openaitest.Usage{PromptTokens: 123, CompletionTokens: 45},
	}
	got := map[bool][]gotCall{}
	res := map[bool]Result{}
	for _, mode := range modes {
		srv := openaitest.New(t, openaitest.Func(func(openaitest.Request) openaitest.Reply { return reply }), openaitest.Say("done"))
		tools := readTools()
		r, err := Run(t.Context(), config(srv, mode.stream), tools, "go")
		if err != nil {
			t.Fatalf("%s: Run: %v", mode.name, err)
		}
		got[mode.stream], res[mode.stream] = tools.got(), r
		// The assistant message sent back carries the content and both calls verbatim.
		asst := srv.Accepted()[1].Body.Messages[2]
		if asst.Text() != reply.Content || len(asst.ToolCalls) != 2 || *asst.ToolCalls[0].Function.Arguments != reply.ToolCalls[0].Arguments {
			t.Errorf("%s: assistant message sent back %+v", mode.name, asst)
		}
	}
	want := []gotCall{{"read_file", `{"path":"a\"quoted\\name.txt"}`}, {"read_file", `{"path":"日本/語.md"}`}}
	for _, mode := range modes {
		if diff := cmp.Diff(want, got[mode.stream]); diff != "" {
			t.Errorf("%s: calls (-want +got):\n%s", mode.name, diff)
		}
	}
	if diff := cmp.Diff(res[false], res[true]); diff != "" {
		t.Errorf("results differ (-json +stream):\n%s", diff)
	}
	if res[true].PromptTokens < 123 || res[true].CompletionTokens < 45 {
		t.Errorf("usage of the streamed reply not counted: %+v", res[true])
	}
}

func TestRun_UnknownToolGoesToCallAndErrorBackToModel(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			srv := openaitest.New(t,
				openaitest.CallTool("write_file", `{"path":"x","content":"y"}`),
				openaitest.Func(func(req openaitest.Request) openaitest.Reply {
					last := req.Body.Messages[len(req.Body.Messages)-1]
					if !strings.HasPrefix(last.Text(), "error: ") || !strings.Contains(last.Text(), "not permitted") {
						t.Errorf("the model got %q, want the refusal", last.Text())
					}
					if names := req.Body.ToolNames(); strings.Contains(strings.Join(names, ","), "write_file") {
						t.Errorf("write_file was offered: %v", names)
					}
					return openaitest.Reply{ToolCalls: []openaitest.Call{{Name: "read_file", Arguments: `{"path":"a"}`}}}
				}),
				openaitest.Say("done"),
			)
			tools := readTools()
			var tr bytes.Buffer
			cfg := config(srv, mode.stream)
			cfg.Transcript = &tr
			res, err := Run(t.Context(), cfg, tools, "go")
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			// The refused call reached Call (where the View audits it), and the loop went on.
			want := []gotCall{{"write_file", `{"path":"x","content":"y"}`}, {"read_file", `{"path":"a"}`}}
			if diff := cmp.Diff(want, tools.got()); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
			if res.Final != "done" || res.Turns != 3 {
				t.Errorf("got %+v, want done after 3 turns", res)
			}
			evs := transcriptEvents(t, tr.Bytes())
			var refused map[string]any
			for _, e := range evs {
				if e["type"] == "tool_result" && e["name"] == "write_file" {
					refused = e
				}
			}
			if refused == nil || refused["is_error"] != true {
				t.Errorf("transcript lacks the refused result: %v", evs)
			}
		})
	}
}

func TestRun_BadArguments(t *testing.T) {
	tests := []struct {
		name, tool, args string
		wantCall         *gotCall // nil: Call must not run
		wantResult       string   // prefix of the tool message
	}{
		{"truncated JSON", "read_file", `{"path":`, nil, "error: arguments are not a JSON object"},
		{"an array", "read_file", `["a"]`, nil, "error: arguments are not a JSON object"},
		{"a string", "read_file", `"a"`, nil, "error: arguments are not a JSON object"},
		{"empty means no arguments", "ask_human_free", ``, &gotCall{"ask_human_free", `{}`}, "error: "},
		{"unknown tool with broken JSON is still refused by Call", "write_file", `{"path":`, &gotCall{"write_file", `"{\"path\":"`}, "error: call \"write_file\": tool not permitted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := openaitest.New(t, openaitest.CallTool(tt.tool, tt.args), openaitest.Say("ok"))
			tools := readTools()
			res, err := Run(t.Context(), config(srv, false), tools, "go")
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			got := tools.got()
			switch {
			case tt.wantCall == nil && len(got) != 0:
				t.Errorf("Call ran with %v, want no call", got)
			case tt.wantCall != nil && (len(got) != 1 || got[0] != *tt.wantCall):
				t.Errorf("got calls %v, want %v", got, *tt.wantCall)
			}
			msgs := srv.Accepted()[1].Body.Messages
			if last := msgs[len(msgs)-1]; last.Role != "tool" || !strings.HasPrefix(last.Text(), tt.wantResult) {
				t.Errorf("the model got %q, want a result starting %q", last.Text(), tt.wantResult)
			}
			if res.Final != "ok" {
				t.Errorf("got %+v, want the loop to go on to the answer", res)
			}
		})
	}
}

func TestRun_NeedsInputEndsTheLoop(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			srv := openaitest.New(t,
				openaitest.CallTools(
					openaitest.Call{Name: "read_file", Arguments: `{"path":"a"}`},
					openaitest.Call{Name: "ask_human", Arguments: `{"question":"Which branch?"}`},
					openaitest.Call{Name: "read_file", Arguments: `{"path":"b"}`},
				),
			)
			tools := readTools()
			var tr bytes.Buffer
			cfg := config(srv, mode.stream)
			cfg.Transcript = &tr
			res, err := Run(t.Context(), cfg, tools, "go")
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if res.NeedsInput != "Which branch?" || res.Final != "" || res.Turns != 1 || res.Stopped != "" {
				t.Errorf("got %+v, want needs input after 1 turn", res)
			}
			if got := tools.got(); len(got) != 2 || got[1].Name != "ask_human" {
				t.Errorf("got calls %v, want read_file then ask_human and nothing after", got)
			}
			if n := len(srv.Requests()); n != 1 {
				t.Errorf("got %d requests, want the loop to stop after the question", n)
			}
			evs := transcriptEvents(t, tr.Bytes())
			if last := evs[len(evs)-1]; last["type"] != "needs_input" || last["question"] != "Which branch?" {
				t.Errorf("last transcript event %v", last)
			}
		})
	}
}

func TestRun_Budgets(t *testing.T) {
	fixedUsage := openaitest.Repeat(openaitest.Func(func(openaitest.Request) openaitest.Reply {
		return openaitest.Reply{ToolCalls: []openaitest.Call{{Name: "read_file", Arguments: `{"path":"a"}`}}, Usage: &openaitest.Usage{PromptTokens: 100, CompletionTokens: 50}}
	}))
	noUsage := openaitest.Repeat(openaitest.Func(func(openaitest.Request) openaitest.Reply {
		return openaitest.Reply{ToolCalls: []openaitest.Call{{Name: "read_file", Arguments: `{"path":"a"}`}}, OmitUsage: true}
	}))
	slowTool := func(_ context.Context, _ string, _ json.RawMessage) (string, error) {
		time.Sleep(20 * time.Millisecond)
		return "slow", nil
	}
	slowReply := openaitest.Func(func(openaitest.Request) openaitest.Reply {
		return openaitest.Reply{Content: "too late", Delay: time.Minute}
	})
	tests := []struct {
		name      string
		step      openaitest.Step
		cfg       func(*Config)
		run       func(context.Context, string, json.RawMessage) (string, error)
		wantStop  string
		wantTurns int // -1: any
		wantTok   int64
	}{
		{"max turns", openaitest.Loop(), func(c *Config) { c.MaxTurns = 3 }, nil, StoppedMaxTurns, 3, -1},
		{"default max turns", openaitest.Loop(), func(*Config) {}, nil, StoppedMaxTurns, DefaultMaxTurns, -1},
		{"max tokens", fixedUsage, func(c *Config) { c.MaxTokens = 400 }, nil, StoppedMaxTokens, 3, 450},
		{"max tokens exactly spent", fixedUsage, func(c *Config) { c.MaxTokens = 300 }, nil, StoppedMaxTokens, 2, 300},
		{"no usage counts nothing", noUsage, func(c *Config) { c.MaxTokens = 1; c.MaxTurns = 4 }, nil, StoppedMaxTurns, 4, 0},
		{"wall time in tools", openaitest.Loop(), func(c *Config) { c.WallTime = 150 * time.Millisecond }, slowTool, StoppedWallTime, -1, -1},
		{"wall time in a request", slowReply, func(c *Config) { c.WallTime = 100 * time.Millisecond }, nil, StoppedWallTime, 0, 0},
	}
	for _, tt := range tests {
		for _, mode := range modes {
			t.Run(tt.name+"/"+mode.name, func(t *testing.T) {
				srv := openaitest.New(t, tt.step)
				tools := readTools()
				if tt.run != nil {
					tools.run = tt.run
				}
				cfg := config(srv, mode.stream)
				tt.cfg(&cfg)
				var tr bytes.Buffer
				cfg.Transcript = &tr
				start := time.Now()
				res, err := Run(t.Context(), cfg, tools, "loop forever")
				if err != nil {
					t.Fatalf("Run: %v", err)
				}
				if elapsed := time.Since(start); elapsed > 10*time.Second {
					t.Errorf("took %s", elapsed)
				}
				if res.Stopped != tt.wantStop || res.Final != "" {
					t.Errorf("got %+v, want stopped by %s", res, tt.wantStop)
				}
				if tt.wantTurns >= 0 && res.Turns != tt.wantTurns {
					t.Errorf("got %d turns, want %d", res.Turns, tt.wantTurns)
				}
				if tt.wantTok >= 0 && res.PromptTokens+res.CompletionTokens != tt.wantTok {
					t.Errorf("got %d tokens, want %d", res.PromptTokens+res.CompletionTokens, tt.wantTok)
				}
				if n := len(srv.Accepted()); tt.wantTurns >= 0 && n != max(tt.wantTurns, 1) {
					t.Errorf("got %d requests, want %d", n, tt.wantTurns)
				}
				evs := transcriptEvents(t, tr.Bytes())
				if last := evs[len(evs)-1]; last["type"] != "stopped" || last["reason"] != tt.wantStop {
					t.Errorf("last transcript event %v", last)
				}
			})
		}
	}
}

func TestRun_CancelIsAnError(t *testing.T) {
	srv := openaitest.New(t, openaitest.Loop())
	ctx, cancel := context.WithCancel(t.Context())
	tools := readTools()
	tools.run = func(context.Context, string, json.RawMessage) (string, error) {
		cancel()
		return "x", nil
	}
	cfg := config(srv, false)
	cfg.WallTime = time.Minute
	res, err := Run(ctx, cfg, tools, "go")
	if !errors.Is(err, context.Canceled) || res.Stopped != "" || res.Turns != 1 {
		t.Errorf("got %+v, %v; want context.Canceled after one turn and no budget stop", res, err)
	}
}

func TestRun_FinishReasonStopWithToolCallsRunsThem(t *testing.T) {
	srv := openaitest.New(t,
		openaitest.Func(func(openaitest.Request) openaitest.Reply {
			return openaitest.Reply{ToolCalls: []openaitest.Call{{Name: "read_file", Arguments: `{"path":"a"}`}}, FinishReason: "stop"}
		}),
		openaitest.Say("done"),
	)
	tools := readTools()
	res, err := Run(t.Context(), config(srv, true), tools, "go")
	if err != nil || res.Final != "done" || len(tools.got()) != 1 {
		t.Errorf("got %+v, %v, calls %v; want the call run and the loop to finish", res, err, tools.got())
	}
}

func TestRun_NoTools(t *testing.T) {
	srv := openaitest.New(t, openaitest.Say("hello"))
	cfg := config(srv, false)
	cfg.SystemPrompt = ""
	res, err := Run(t.Context(), cfg, nil, "hi")
	if err != nil || res.Final != "hello" {
		t.Fatalf("got %+v, %v", res, err)
	}
	body := srv.Accepted()[0].Body
	if len(body.Tools) != 0 || len(body.ToolChoice) != 0 || len(body.Messages) != 1 || body.Messages[0].Role != "user" {
		t.Errorf("got request %+v, want one user message and no tools", body)
	}
}

func TestRun_NoToolsButTheModelCallsOne(t *testing.T) {
	srv := openaitest.New(t, openaitest.CallTool("read_file", `{}`), openaitest.Say("ok"))
	res, err := Run(t.Context(), config(srv, false), nil, "hi")
	if err != nil || res.Final != "ok" {
		t.Fatalf("got %+v, %v", res, err)
	}
	msgs := srv.Accepted()[1].Body.Messages
	if got := msgs[len(msgs)-1].Text(); got != "error: no tools are available" {
		t.Errorf("the model got %q", got)
	}
}

func TestRun_LongToolResultIsTruncated(t *testing.T) {
	srv := openaitest.New(t, openaitest.CallTool("read_file", `{"path":"big"}`), openaitest.Say("ok"))
	tools := readTools()
	tools.run = func(context.Context, string, json.RawMessage) (string, error) {
		return strings.Repeat("é", maxToolResultBytes), nil // twice the limit in bytes
	}
	if _, err := Run(t.Context(), config(srv, false), tools, "go"); err != nil {
		t.Fatal(err)
	}
	msgs := srv.Accepted()[1].Body.Messages
	got := msgs[len(msgs)-1].Text()
	if len(got) > maxToolResultBytes+64 || !strings.HasSuffix(got, "[truncated: 1048576 more bytes]") {
		t.Errorf("got a %d-byte result ending %q", len(got), got[max(0, len(got)-40):])
	}
}

func TestRun_UnixSocket(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			srv := openaitest.New(t, openaitest.CallTool("read_file", `{"path":"a"}`), openaitest.Say("via the gateway"))
			sock := filepath.Join(t.TempDir(), "gw.sock")
			srv.ServeUnix(sock)
			cfg := config(srv, mode.stream)
			cfg.BaseURL = openaitest.UnixBaseURL
			cfg.Client = openaitest.UnixClient(t, sock)
			res, err := Run(t.Context(), cfg, readTools(), "go")
			if err != nil || res.Final != "via the gateway" || res.Turns != 2 {
				t.Fatalf("got %+v, %v", res, err)
			}
			assertNoAuthorization(t, srv)
		})
	}
}

func TestRun_APIKeyOnlyWhenSet(t *testing.T) {
	srv := openaitest.New(t, openaitest.Say("in"))
	srv.RequireAPIKey("sk-test-0123456789")
	cfg := config(srv, false)
	_, err := Run(t.Context(), cfg, nil, "hi")
	var he *HTTPError
	if !errors.As(err, &he) || he.StatusCode != 401 {
		t.Fatalf("got %v without a key, want a 401 HTTPError", err)
	}
	assertNoAuthorization(t, srv)

	cfg.APIKey = "sk-test-0123456789"
	if res, err := Run(t.Context(), cfg, nil, "hi"); err != nil || res.Final != "in" {
		t.Fatalf("got %+v, %v with the key", res, err)
	}
	reqs := srv.Requests()
	if got := reqs[len(reqs)-1].Header.Get("Authorization"); got != "Bearer sk-test-0123456789" {
		t.Errorf("got Authorization %q", got)
	}
}

func TestRun_BadConfig(t *testing.T) {
	srv := openaitest.New(t)
	good := config(srv, false)
	tests := []struct {
		name  string
		edit  func(*Config)
		tools Tools
		want  string
	}{
		{"no base URL", func(c *Config) { c.BaseURL = "" }, nil, "no base URL"},
		{"not http", func(c *Config) { c.BaseURL = "unix:///gw.sock" }, nil, "not an http or https URL"},
		{"no model", func(c *Config) { c.Model = "" }, nil, "no model"},
		{"no client", func(c *Config) { c.Client = nil }, nil, "no HTTP client"},
		{"negative turns", func(c *Config) { c.MaxTurns = -1 }, nil, "max turns -1"},
		{"negative tokens", func(c *Config) { c.MaxTokens = -1 }, nil, "max tokens -1"},
		{"negative wall time", func(c *Config) { c.WallTime = -time.Second }, nil, "wall time -1s"},
		{"bad parameters", func(*Config) {}, &fakeTools{specs: []ToolSpec{{Name: "t", Parameters: json.RawMessage(`[]`)}}}, `tool "t": parameters are not a JSON object`},
		{"nameless tool", func(*Config) {}, &fakeTools{specs: []ToolSpec{{}}}, "a tool has no name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := good
			tt.edit(&cfg)
			_, err := Run(t.Context(), cfg, tt.tools, "hi")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("a bad config sent %d requests", n)
	}
}

type failWriter struct{ after int }

func (f *failWriter) Write(b []byte) (int, error) {
	if f.after == 0 {
		return 0, errors.New("disk full")
	}
	f.after--
	return len(b), nil
}

func TestRun_TranscriptWriteFailureIsAnError(t *testing.T) {
	srv := openaitest.New(t, openaitest.Loop())
	cfg := config(srv, false)
	cfg.Transcript = &failWriter{after: 3}
	res, err := Run(t.Context(), cfg, readTools(), "go")
	if err == nil || !strings.Contains(err.Error(), "write transcript: disk full") {
		t.Errorf("got %+v, %v; want the write error", res, err)
	}
	if res.Turns > 2 {
		t.Errorf("the loop ran %d turns without a transcript", res.Turns)
	}
}
