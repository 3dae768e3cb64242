package budget

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
)

// Event streams as the real APIs send them (abridged content, the real event sequence and
// usage objects).
const (
	anthropicStream = "event: message_start\n" +
		`data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5-20250929","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":120,"cache_creation_input_tokens":30,"cache_read_input_tokens":50,"output_tokens":1,"service_tier":"standard"}}}` + "\n\n" +
		"event: content_block_start\n" +
		`data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n" +
		"event: ping\ndata: {\"type\": \"ping\"}\n\n" +
		"event: content_block_delta\n" +
		`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"the word usage in text"}}` + "\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: message_delta\n" +
		`data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":42}}` + "\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"

	chatStream = `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}` + "\n\n" +
		`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}],"usage":null}` + "\n\n" +
		`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}` + "\n\n" +
		`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-2024-08-06","choices":[],"usage":{"prompt_tokens":200,"completion_tokens":17,"total_tokens":217,"prompt_tokens_details":{"cached_tokens":128,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}` + "\n\n" +
		"data: [DONE]\n\n"

	responsesStream = "event: response.created\n" +
		`data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","model":"gpt-5-codex","output":[],"usage":null}}` + "\n\n" +
		"event: response.output_text.delta\n" +
		`data: {"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"done"}` + "\n\n" +
		"event: response.completed\n" +
		`data: {"type":"response.completed","sequence_number":9,"response":{"id":"resp_1","object":"response","status":"completed","model":"gpt-5-codex","output":[{"type":"message","content":[{"type":"output_text","text":"done"}]}],"usage":{"input_tokens":900,"input_tokens_details":{"cached_tokens":600},"output_tokens":55,"output_tokens_details":{"reasoning_tokens":20},"total_tokens":955}}}` + "\n\n"
)

func TestResponse_Streams(t *testing.T) {
	for _, tc := range []struct {
		name  string
		shape Shape
		body  string
		model string
		want  Usage
	}{
		{"anthropic", ShapeAnthropic, anthropicStream, "claude-sonnet-4-5-20250929", Usage{InputTokens: 200, CachedTokens: 50, OutputTokens: 42, CacheWrite1hTokens: 30}},
		{"chat", ShapeChat, chatStream, "gpt-4o-2024-08-06", Usage{InputTokens: 200, CachedTokens: 128, OutputTokens: 17}},
		{"responses", ShapeResponses, responsesStream, "gpt-5-codex", Usage{InputTokens: 900, CachedTokens: 600, OutputTokens: 55}},
		{"crlf lines", ShapeChat, strings.ReplaceAll(chatStream, "\n", "\r\n"), "gpt-4o-2024-08-06", Usage{InputTokens: 200, CachedTokens: 128, OutputTokens: 17}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Fed in every chunk size, so events straddle writes.
			for _, size := range []int{1, 7, 64, len(tc.body)} {
				r := NewResponse(tc.shape, true)
				for b := []byte(tc.body); len(b) > 0; {
					n := min(size, len(b))
					r.Write(b[:n])
					b = b[n:]
				}
				model, u, seen := r.Result()
				if !seen || model != tc.model || u != tc.want {
					t.Fatalf("chunks of %d: Result = %q %+v %v, want %q %+v", size, model, u, seen, tc.model, tc.want)
				}
			}
		})
	}
}

func TestResponse_Bodies(t *testing.T) {
	for _, tc := range []struct {
		name  string
		shape Shape
		body  string
		model string
		want  Usage
	}{
		{"anthropic", ShapeAnthropic, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-haiku-4-5","content":[{"type":"text","text":"{\"usage\":{\"input_tokens\":999999}}"}],"stop_reason":"end_turn","usage":{"input_tokens":10,"cache_read_input_tokens":5,"output_tokens":3}}`, "claude-haiku-4-5", Usage{InputTokens: 15, CachedTokens: 5, OutputTokens: 3}},
		{"chat", ShapeChat, `{"id":"c","object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"x"},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":4,"total_tokens":16}}`, "gpt-4o-mini", Usage{InputTokens: 12, OutputTokens: 4}},
		{"responses, usage first, spaces", ShapeResponses, ` { "usage" : { "input_tokens" : 7 , "output_tokens" : 2, "input_tokens_details": {"cached_tokens": 1} } , "model" : "gpt-5" } `, "gpt-5", Usage{InputTokens: 7, CachedTokens: 1, OutputTokens: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, size := range []int{1, 5, len(tc.body)} {
				r := NewResponse(tc.shape, false)
				for b := []byte(tc.body); len(b) > 0; {
					n := min(size, len(b))
					r.Write(b[:n])
					b = b[n:]
				}
				model, u, seen := r.Result()
				if !seen || model != tc.model || u != tc.want {
					t.Fatalf("chunks of %d: Result = %q %+v %v, want %q %+v", size, model, u, seen, tc.model, tc.want)
				}
			}
		})
	}
}

func TestResponse_NoUsage(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream bool
		body   string
	}{
		{"chat stream without include_usage", true, strings.ReplaceAll(chatStream, `"prompt_tokens"`, `"x"`)[:200]},
		{"error body", false, `{"type":"error","error":{"type":"overloaded_error","message":"usage"}}`},
		{"not json", false, `<html>usage</html>`},
		{"usage null", false, `{"usage":null}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewResponse(ShapeChat, tc.stream)
			r.Write([]byte(tc.body))
			if _, u, seen := r.Result(); seen {
				t.Errorf("usage seen: %+v", u)
			}
		})
	}
}

// TestResponse_LongLineSkipped: a line over MaxEventLine is dropped whole, and the lines
// after it are still read.
func TestResponse_LongLineSkipped(t *testing.T) {
	r := NewResponse(ShapeChat, true)
	r.Write([]byte(`data: {"usage":{"prompt_tokens":1000000}, "pad":"`))
	r.Write([]byte(strings.Repeat("x", MaxEventLine)))
	r.Write([]byte("\"}\n" + `data: {"usage":{"prompt_tokens":3,"completion_tokens":1}}` + "\n"))
	if _, u, seen := r.Result(); !seen || u.InputTokens != 3 {
		t.Fatalf("Result = %+v %v", u, seen)
	}
}

func TestMeter(t *testing.T) {
	ps := Prices{"m": {InputPerMTok: 1_000, OutputPerMTok: 2_000}} // $0.001 and $0.002 a token
	t.Run("calls", func(t *testing.T) {
		m := NewMeter(Budget{ModelCalls: 2}, nil, "")
		for i := range 2 {
			if s := m.Spent(); s != "" {
				t.Fatalf("call %d refused: %s", i, s)
			}
			m.Call()
			m.Add("x", Usage{}, false) // no token limit: missing usage is fine
		}
		if s := m.Spent(); s != "model call budget spent: 2 of 2 calls" {
			t.Fatalf("Spent = %q", s)
		}
	})
	t.Run("tokens", func(t *testing.T) {
		m := NewMeter(Budget{Tokens: 100}, nil, "")
		m.Call()
		m.Add("x", Usage{InputTokens: 60, OutputTokens: 30}, true)
		if s := m.Spent(); s != "" {
			t.Fatalf("spent at 90 of 100: %s", s)
		}
		m.Add("x", Usage{InputTokens: 5, OutputTokens: 5}, true)
		if s := m.Spent(); !strings.HasPrefix(s, "token budget spent: 100 of 100") {
			t.Fatalf("Spent = %q", s)
		}
	})
	t.Run("usd", func(t *testing.T) {
		m := NewMeter(Budget{USD: 0.01}, ps, "m")
		m.Add("", Usage{InputTokens: 4, OutputTokens: 2}, true) // declared model: $0.008
		if s := m.Spent(); s != "" {
			t.Fatalf("spent at $0.008: %s", s)
		}
		m.Add("m", Usage{InputTokens: 2}, true)
		if s := m.Spent(); s != "usd budget spent: $0.01 of $0.01" {
			t.Fatalf("Spent = %q", s)
		}
		if u := m.Usage(); u.CostUSD != 0.01 || u.InputTokens != 6 {
			t.Errorf("Usage = %+v", u)
		}
	})
	t.Run("unpriced model fails closed", func(t *testing.T) {
		m := NewMeter(Budget{USD: 5}, ps, "m")
		m.Add("other", Usage{InputTokens: 1}, true)
		if s := m.Spent(); !strings.Contains(s, `model "other" has no price`) {
			t.Fatalf("Spent = %q", s)
		}
	})
	t.Run("unpriced model refused before the call", func(t *testing.T) {
		m := NewMeter(Budget{USD: 5}, Prices{"m": {InputPerMTok: 1, Aliases: []string{"m-2025-01-01"}}}, "m")
		for _, ok := range []string{"m", "m-2025-01-01"} {
			if r := m.Unpriced(ok); r != "" {
				t.Errorf("Unpriced(%q) = %q, want a priced model", ok, r)
			}
		}
		if r := m.Unpriced("m-pro-2025-03-19"); !strings.Contains(r, `usd budget of $5 cannot count model "m-pro-2025-03-19": agora.yaml prices m (m-2025-01-01)`) {
			t.Errorf("Unpriced = %q", r)
		}
		if r := NewMeter(Budget{Tokens: 5}, nil, "m").Unpriced("anything"); r != "" {
			t.Errorf("without a usd budget any model can be counted, got %q", r)
		}
	})
	t.Run("missing usage fails closed", func(t *testing.T) {
		m := NewMeter(Budget{Tokens: 1_000_000}, nil, "")
		m.Add("", Usage{}, false)
		if s := m.Spent(); !strings.Contains(s, "reported no usage") {
			t.Fatalf("Spent = %q", s)
		}
	})
	t.Run("concurrent", func(t *testing.T) {
		m := NewMeter(Budget{Tokens: 1 << 40}, ps, "m")
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 100 {
					m.Call()
					m.Add("m", Usage{InputTokens: 1, OutputTokens: 1}, true)
					_ = m.Spent()
				}
			})
		}
		wg.Wait()
		if u := m.Usage(); u.ModelCalls != 800 || u.Tokens() != 1600 || u.CostUSD != 2.4 {
			t.Errorf("Usage = %+v", u)
		}
	})
}

// FuzzResponse: any body, in any shape, fed in two writes at any cut, never panics, and an
// event stream reads the same whatever the cut.
func FuzzResponse(f *testing.F) {
	for _, s := range []string{anthropicStream, chatStream, responsesStream, `{"usage":{"prompt_tokens":1},"model":"m"}`, `{"a":[{"usage":1}],"usage":{"input_tokens":-5}}`, `{"usage":{"input_tokens":9223372036854775807,"cache_read_input_tokens":9223372036854775807}}`} {
		f.Add([]byte(s), uint16(3), uint8(1), false)
		f.Add([]byte(s), uint16(40), uint8(3), true)
	}
	f.Fuzz(func(t *testing.T, body []byte, cut uint16, shape uint8, stream bool) {
		sh := Shape(shape%3 + 1)
		c := min(int(cut), len(body))
		a := NewResponse(sh, stream)
		a.Write(body[:c])
		a.Write(body[c:])
		ma, ua, sa := a.Result()
		if ua.InputTokens < 0 || ua.OutputTokens < 0 || ua.CachedTokens < 0 || ua.CachedTokens > ua.InputTokens {
			t.Fatalf("usage out of range: %+v", ua)
		}
		b := NewResponse(sh, stream)
		b.Write(body)
		mb, ub, sb := b.Result()
		if ma != mb || ua != ub || sa != sb {
			t.Fatalf("cut at %d: %q %+v %v; whole: %q %+v %v", c, ma, ua, sa, mb, ub, sb)
		}
	})
}

// FuzzTopScan: for a JSON object encoding/json reads, the scanner finds the same top-level
// usage encoding/json does (keys spelled exactly, no escapes in them).
func FuzzTopScan(f *testing.F) {
	f.Add(`{"model":"m","usage":{"prompt_tokens":3,"completion_tokens":4}}`)
	f.Add(`{"x":{"usage":{"prompt_tokens":9}},"usage":{"prompt_tokens":1}}`)
	f.Add(`{"s":"\"usage\":{","usage":{"prompt_tokens":2}}`)
	f.Fuzz(func(t *testing.T, body string) {
		var whole struct {
			Model string          `json:"model"`
			Usage json.RawMessage `json:"usage"`
		}
		var keys map[string]json.RawMessage
		if json.Unmarshal([]byte(body), &keys) != nil || json.Unmarshal([]byte(body), &whole) != nil {
			return
		}
		for k := range keys {
			if k != "model" && k != "usage" && strings.EqualFold(k, "usage") || strings.EqualFold(k, "model") && k != "model" {
				return // encoding/json matches keys without regard to case; the scanner does not
			}
		}
		if strings.Contains(body, `\`) {
			return
		}
		r := NewResponse(ShapeChat, false)
		r.Write([]byte(body))
		_, got, _ := r.Result()
		_, want, _ := ShapeChat.decodeEnvelope([]byte(body))
		if len(whole.Usage) > maxCapture-2 {
			return
		}
		if got != want {
			t.Fatalf("scanner %+v, encoding/json %+v", got, want)
		}
	})
}

func BenchmarkMeterSpent(b *testing.B) {
	m := NewMeter(Budget{Tokens: 1 << 40, USD: 1000, ModelCalls: 1 << 30}, Prices{"m": {InputPerMTok: 1}}, "m")
	b.ReportAllocs()
	for b.Loop() {
		if m.Spent() != "" {
			b.Fatal("spent")
		}
	}
}

// BenchmarkResponse is the usage counting of one response as it passes: a streamed one (the
// Anthropic event sequence) and a 1 MiB Chat Completions body.
func BenchmarkResponse(b *testing.B) {
	big := `{"id":"c","model":"m","choices":[{"message":{"content":"` + strings.Repeat("x", 1<<20) + `"}}],"usage":{"prompt_tokens":1,"completion_tokens":2}}`
	for _, tc := range []struct {
		name   string
		shape  Shape
		stream bool
		body   string
	}{
		{"anthropic-stream", ShapeAnthropic, true, anthropicStream},
		{"chat-body-1MiB", ShapeChat, false, big},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(tc.body)))
			for b.Loop() {
				r := NewResponse(tc.shape, tc.stream)
				r.Write([]byte(tc.body))
				if _, _, seen := r.Result(); !seen {
					b.Fatal("no usage")
				}
			}
		})
	}
}

// BenchmarkMeterReserve is the gateway's check of a model call: Spent plus the call's atomic
// reservation.
func BenchmarkMeterReserve(b *testing.B) {
	m := NewMeter(Budget{Tokens: 1 << 40, USD: 1000, ModelCalls: 1 << 40}, Prices{"m": {InputPerMTok: 1}}, "m")
	b.ReportAllocs()
	for b.Loop() {
		if m.Reserve() != "" {
			b.Fatal("spent")
		}
	}
}

// Call counts one model request forwarded upstream without checking the budget, as a route
// that Reserve does not check would.
func (m *Meter) Call() { m.calls.Add(1) }
