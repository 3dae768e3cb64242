package openairt

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"unicode"
	"unicode/utf8"
)

// Seeds are replies as OpenAI, vLLM and Ollama send them.
const (
	seedOpenAIStream = "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"index\":0,\"id\":\"call_a\",\"type\":\"function\",\"function\":{\"name\":\"read_file\",\"arguments\":\"\"}}],\"refusal\":null},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"pa\"}}]},\"finish_reason\":null}],\"usage\":null}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"th\\\":\\\"a\\\"}\"}}]},\"finish_reason\":null}],\"usage\":null}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}],\"usage\":null}\n\n" +
		"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":3,\"total_tokens\":12}}\n\n" +
		"data: [DONE]\n\n"
	seedOllamaStream = "data: {\"id\":\"chatcmpl-2\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"llama3.2\",\"system_fingerprint\":\"fp_ollama\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"id\":\"call_x\",\"index\":0,\"type\":\"function\",\"function\":{\"name\":\"read_file\",\"arguments\":\"{\\\"path\\\":\\\"a\\\"}\"}}]},\"finish_reason\":null}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":\"tool_calls\"}]}\n\n" +
		"data: [DONE]\n\n"
	seedVLLMStream = "data: {\"id\":\"chatcmpl-3\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"qwen\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":null,\"finish_reason\":null}]}\r\n\r\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"},\"logprobs\":null,\"finish_reason\":null}]}\r\n\r\n" +
		": keep-alive\r\n\r\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"},\"logprobs\":null,\"finish_reason\":\"stop\",\"stop_reason\":null}]}\r\n\r\n" +
		"data: [DONE]\r\n\r\n"
	seedOpenAIJSON = `{"id":"chatcmpl-4","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_b","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"a\"}"}}],"refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":82,"completion_tokens":17,"total_tokens":99},"service_tier":"default","system_fingerprint":"fp_1"}`
)

// cutPoints splits s into fragments on rune boundaries, cutting after rune i when bit i%64
// of cuts is set.
func cutPoints(s string, cuts uint64) []string {
	var out []string
	start, i := 0, 0
	for j := range s {
		if j > start && cuts>>(uint(i)%64)&1 == 1 {
			out = append(out, s[start:j])
			start = j
		}
		i++
	}
	return append(out, s[start:])
}

// buildStream writes content and one tool call as a well-formed stream, fragments cut by
// cuts, with the line ending, comments and spacing mode picks.
func buildStream(t *testing.T, content, args string, cuts uint64, mode uint8) []byte {
	t.Helper()
	eol := []string{"\n", "\r\n", "\r"}[int(mode)%3]
	prefix := "data: "
	if mode&8 != 0 {
		prefix = "data:"
	}
	var b bytes.Buffer
	send := func(v any) {
		j, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if mode&16 != 0 {
			b.WriteString(": ping" + eol + "event: message" + eol)
		}
		b.WriteString(prefix + string(j) + eol + eol)
	}
	type fn struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	}
	type tc struct {
		Index    int    `json:"index"`
		ID       string `json:"id,omitempty"`
		Type     string `json:"type,omitempty"`
		Function fn     `json:"function"`
	}
	delta := func(d map[string]any) {
		send(map[string]any{"object": "chat.completion.chunk", "choices": []any{map[string]any{"index": 0, "delta": d, "finish_reason": nil}}})
	}
	delta(map[string]any{"role": "assistant", "content": ""})
	for _, p := range cutPoints(content, cuts) {
		delta(map[string]any{"content": p})
	}
	delta(map[string]any{"tool_calls": []tc{{Index: 0, ID: "call_1", Type: "function", Function: fn{Name: "read_file"}}}})
	for _, p := range cutPoints(args, cuts>>7|cuts<<57) {
		delta(map[string]any{"tool_calls": []tc{{Index: 0, Function: fn{Arguments: p}}}})
	}
	send(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": "tool_calls"}}})
	send(map[string]any{"choices": []any{}, "usage": map[string]int{"prompt_tokens": 5, "completion_tokens": 7}})
	b.WriteString(prefix + "[DONE]" + eol + eol)
	return b.Bytes()
}

func FuzzSSE(f *testing.F) {
	for _, s := range []string{seedOpenAIStream, seedOllamaStream, seedVLLMStream, "data: [DONE]\n\n", "data: {}\r", "\r\r\r", "data:\ndata:\n\n", ""} {
		f.Add([]byte(s), "Hello, wörld", `{"path":"a\"b","n":[1,2]}`, uint64(0xa5a5_5a5a_dead_beef), uint8(0))
	}
	f.Add([]byte(seedOpenAIStream), "", "", uint64(0), uint8(1))
	f.Add([]byte(seedVLLMStream), "日本語", `{"q":"\u2028\n"}`, ^uint64(0), uint8(2|4|8|16))
	f.Fuzz(func(t *testing.T, raw []byte, content, args string, cuts uint64, mode uint8) {
		// Any bytes: no panic, and a success is a usable completion.
		var r io.Reader = bytes.NewReader(raw)
		if mode&4 != 0 {
			r = iotest.OneByteReader(r)
		}
		if c, err := decodeStream(r, 1<<16); err == nil {
			if len(c.ToolCalls) > maxToolCalls {
				t.Fatalf("%d tool calls", len(c.ToolCalls))
			}
			for _, tc := range c.ToolCalls {
				if tc.Function.Name == "" {
					t.Fatalf("accepted a nameless call: %+v", c)
				}
			}
		}

		// A well-formed stream reassembles exactly, however its fragments were cut.
		if !utf8.ValidString(content) || !utf8.ValidString(args) {
			return
		}
		stream := buildStream(t, content, args, cuts, mode)
		r = bytes.NewReader(stream)
		if mode&4 != 0 {
			r = iotest.OneByteReader(r)
		}
		c, err := decodeStream(r, 1<<20)
		if err != nil {
			t.Fatalf("decode well-formed stream: %v\n%q", err, stream)
		}
		if c.Content != content || len(c.ToolCalls) != 1 || c.ToolCalls[0].Function.Arguments != args ||
			c.ToolCalls[0].Function.Name != "read_file" || c.ToolCalls[0].ID != "call_1" || c.FinishReason != "tool_calls" ||
			c.Usage == nil || c.Usage.PromptTokens != 5 || c.Usage.CompletionTokens != 7 {
			t.Fatalf("got %+v from %q, want content %q and arguments %q", c, stream, content, args)
		}
	})
}

func FuzzResponse(f *testing.F) {
	for _, s := range []string{seedOpenAIJSON, `{"choices":[{"message":{"tool_calls":[{"function":{"name":"a","Name":"b","arguments":"{}"}}]}}]}`,
		`{"choices":[{"message":{"tool_calls":[{"function":{"name":"a","arguments":"{}"}}]}}],"Choices":[]}`, `{"choices":[{"message":{"content":"hi"}}]}`, `{"error":{"message":"x"}}`, `{"object":"error","message":"m"}`, `null`, `[]`, ``} {
		f.Add([]byte(s), "Hello", `{"path":"a"}`, "read_file")
	}
	f.Fuzz(func(t *testing.T, raw []byte, content, args, name string) {
		// Any bytes: no panic, and a success is a usable completion.
		if c, err := decodeResponse(raw); err == nil {
			if len(c.ToolCalls) > maxToolCalls {
				t.Fatalf("%d tool calls", len(c.ToolCalls))
			}
			for _, tc := range c.ToolCalls {
				if tc.Function.Name == "" {
					t.Fatalf("accepted a nameless call: %+v", c)
				}
			}
			if c.Usage != nil && (c.Usage.PromptTokens < 0 || c.Usage.CompletionTokens < 0) {
				t.Fatalf("negative usage %+v", c.Usage)
			}
			sameToCaseSensitiveReader(t, raw, c)
		}
		// Any error body: the quoted message is bounded, valid UTF-8, free of control characters.
		msg := errorMessage(raw)
		if len(msg) > maxErrorMessage+len("...") || !utf8.ValidString(msg) || strings.ContainsFunc(msg, unicode.IsControl) {
			t.Fatalf("errorMessage returned %q", msg)
		}

		// A well-formed reply decodes to exactly what was sent.
		if !utf8.ValidString(content) || !utf8.ValidString(args) || !utf8.ValidString(name) || name == "" {
			return
		}
		var body struct {
			Object  string `json:"object"`
			Choices []any  `json:"choices"`
			Usage   any    `json:"usage"`
		}
		body.Object = "chat.completion"
		body.Choices = []any{map[string]any{
			"index": 0, "finish_reason": "tool_calls", "logprobs": nil,
			"message": map[string]any{"role": "assistant", "content": content, "refusal": nil, "tool_calls": []any{
				map[string]any{"id": "call_9", "type": "function", "function": map[string]any{"name": name, "arguments": args}},
			}},
		}}
		body.Usage = map[string]int{"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		c, err := decodeResponse(b)
		if err != nil {
			t.Fatalf("decode well-formed reply %s: %v", b, err)
		}
		if c.Content != content || len(c.ToolCalls) != 1 || c.ToolCalls[0].Function.Name != name ||
			c.ToolCalls[0].Function.Arguments != args || c.FinishReason != "tool_calls" || c.Usage == nil || *c.Usage != (usage{3, 4}) {
			t.Fatalf("got %+v from %s", c, b)
		}
	})
}

// sameToCaseSensitiveReader fails t unless the tool calls decodeResponse read from raw are
// what a reader that matches keys exactly (and sees every key) finds there: the choice the
// loop takes (index 0, else the first) and each call's name and arguments.
func sameToCaseSensitiveReader(t *testing.T, raw []byte, c completion) {
	t.Helper()
	var top map[string]any
	if json.Unmarshal(raw, &top) != nil {
		return
	}
	choices, _ := top["choices"].([]any)
	if len(choices) == 0 {
		t.Fatalf("decoded %+v from a reply a case-sensitive reader finds no choices in: %s", c, raw)
	}
	ch, _ := choices[0].(map[string]any)
	for _, x := range choices {
		if m, _ := x.(map[string]any); m != nil && m["index"] == float64(0) {
			ch = m
			break
		}
	}
	msg, _ := ch["message"].(map[string]any)
	calls, _ := msg["tool_calls"].([]any)
	if len(calls) != len(c.ToolCalls) {
		t.Fatalf("decoded %d tool calls, a case-sensitive reader finds %d in %s", len(c.ToolCalls), len(calls), raw)
	}
	for i, x := range calls {
		m, _ := x.(map[string]any)
		fn, _ := m["function"].(map[string]any)
		name, _ := fn["name"].(string)
		args, _ := fn["arguments"].(string)
		if name != c.ToolCalls[i].Function.Name || args != c.ToolCalls[i].Function.Arguments {
			t.Fatalf("call %d decoded as %q(%q), a case-sensitive reader reads %q(%q) in %s", i, c.ToolCalls[i].Function.Name, c.ToolCalls[i].Function.Arguments, name, args, raw)
		}
	}
}
