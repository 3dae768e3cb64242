package openairt

import (
	"bytes"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/runtime/openairt/openaitest"
)

func TestRun_RetriesRateLimitHonoringRetryAfter(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			srv := openaitest.New(t,
				openaitest.Func(func(openaitest.Request) openaitest.Reply {
					return openaitest.Reply{Status: 429, Message: "Rate limit reached", Header: http.Header{"Retry-After": {"1"}}}
				}),
				openaitest.Say("made it"),
			)
			cfg := config(srv, mode.stream)
			cfg.backoff = func(int) time.Duration { return time.Hour } // must not be used: the server said 1s
			var tr bytes.Buffer
			cfg.Transcript = &tr
			start := time.Now()
			res, err := Run(t.Context(), cfg, nil, "hi")
			elapsed := time.Since(start)
			if err != nil || res.Final != "made it" || res.Turns != 1 {
				t.Fatalf("got %+v, %v", res, err)
			}
			if elapsed < time.Second || elapsed > 5*time.Second {
				t.Errorf("took %s, want about the 1s Retry-After", elapsed)
			}
			if n := len(srv.Accepted()); n != 2 {
				t.Errorf("got %d requests, want 2", n)
			}
			var retry map[string]any
			for _, e := range transcriptEvents(t, tr.Bytes()) {
				if e["type"] == "retry" {
					retry = e
				}
			}
			if retry == nil || retry["status"] != 429.0 || retry["wait_ms"] != 1000.0 {
				t.Errorf("retry event %v, want status 429 and wait_ms 1000", retry)
			}
		})
	}
}

func TestRun_ServerErrors(t *testing.T) {
	tests := []struct {
		name         string
		status       int
		message      string
		wantRequests int
		wantMessage  string
	}{
		{"500 forever", 500, "The server had an error while processing your request.", 1 + maxRetries, "The server had an error while processing your request."},
		{"503 forever", 503, "overloaded", 1 + maxRetries, "overloaded"},
		{"429 forever", 429, "slow down", 1 + maxRetries, "slow down"},
		{"400 is not retried", 400, "Invalid 'messages'", 1, "Invalid 'messages'"},
		{"401 is not retried", 401, "Incorrect API key provided.", 1, "Incorrect API key provided."},
		{"long message is bounded", 500, strings.Repeat("é", 4000), 1 + maxRetries, strings.Repeat("é", maxErrorMessage/2) + "..."},
		{"control characters are blanked", 400, "line one\nline two\x1b[31m", 1, "line one line two [31m"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := openaitest.New(t, openaitest.Repeat(openaitest.Func(func(openaitest.Request) openaitest.Reply {
				return openaitest.Reply{Status: tt.status, Message: tt.message, Header: http.Header{"X-Request-Secret": {"sk-hdr-secret"}}}
			})))
			_, err := Run(t.Context(), config(srv, false), nil, "hi")
			var he *HTTPError
			if !errors.As(err, &he) {
				t.Fatalf("got %v, want an HTTPError", err)
			}
			if he.StatusCode != tt.status || he.Message != tt.wantMessage {
				t.Errorf("got %d %q, want %d %q", he.StatusCode, he.Message, tt.status, tt.wantMessage)
			}
			if strings.Contains(err.Error(), "sk-hdr-secret") {
				t.Errorf("the error echoes a header: %v", err)
			}
			if !strings.Contains(err.Error(), "chat completion turn 1: model endpoint answered") {
				t.Errorf("got error %q", err)
			}
			if n := len(srv.Accepted()); n != tt.wantRequests {
				t.Errorf("got %d requests, want %d", n, tt.wantRequests)
			}
		})
	}
}

func TestRun_RetryWaitRespectsWallTime(t *testing.T) {
	srv := openaitest.New(t, openaitest.Repeat(openaitest.Func(func(openaitest.Request) openaitest.Reply {
		return openaitest.Reply{Status: 503, Header: http.Header{"Retry-After": {"30"}}}
	})))
	cfg := config(srv, false)
	cfg.WallTime = 200 * time.Millisecond
	start := time.Now()
	res, err := Run(t.Context(), cfg, nil, "hi")
	if err != nil || res.Stopped != StoppedWallTime {
		t.Errorf("got %+v, %v; want stopped by wall time", res, err)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("took %s: the retry wait ignored the wall time", elapsed)
	}
}

func TestRun_BrokenReplies(t *testing.T) {
	sse := "text/event-stream"
	tests := []struct {
		name, body, contentType string
		want                    error
		wantText                string
	}{
		{"not JSON", "<html>oops</html>", "application/json", ErrBadResponse, "invalid JSON"},
		{"no choices", `{"choices":[]}`, "application/json", ErrBadResponse, "no choices"},
		{"arguments as an object", `{"choices":[{"index":0,"message":{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":{}}}]}}]}`, "application/json", ErrBadResponse, "arguments"},
		{"nameless call", `{"choices":[{"index":0,"message":{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"arguments":"{}"}}]}}]}`, "application/json", ErrBadResponse, "no name"},
		{"error object with 200", `{"error":{"message":"quota"}}`, "application/json", ErrBadResponse, "quota"},
		{"too large", `{"choices":[{"message":{"content":"` + strings.Repeat("a", maxResponseBytes) + `"}}]}`, "application/json", ErrResponseTooLarge, ""},
		{"stream cut off", "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hal\"}}]}\n\n", sse, ErrBadResponse, "without a finish reason"},
		{"stream error event", "data: {\"error\":{\"message\":\"upstream died\"}}\n\n", sse, ErrBadResponse, "upstream died"},
		{"stream bad chunk", "data: {nope\n\ndata: [DONE]\n\n", sse, ErrBadResponse, "chunk 0"},
		{"stream line too long", "data: \"" + strings.Repeat("a", maxResponseBytes) + "\n\n", sse, ErrResponseTooLarge, ""},
		// A reply that names one tool to the loop and another to a case-sensitive
		// reader of the transcript (encoding/json folds case and keeps the last duplicate).
		{"name and Name", `{"choices":[{"index":0,"message":{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"list_files","Name":"run_command","arguments":"{}"}}]}}]}`, "application/json", ErrBadResponse, `duplicate key "Name"`},
		{"lone Name", `{"choices":[{"index":0,"message":{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"Name":"run_command","arguments":"{}"}}]}}]}`, "application/json", ErrBadResponse, `keys are case-sensitive`},
		{"arguments twice", `{"choices":[{"index":0,"message":{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}","arguments":"{\"argv\":[\"x\"]}"}}]}}]}`, "application/json", ErrBadResponse, `duplicate key "arguments"`},
		{"stream name and Name", "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c\",\"function\":{\"name\":\"list_files\",\"Name\":\"run_command\",\"arguments\":\"{}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n", sse, ErrBadResponse, `duplicate key "Name"`},
		{"stream Choices", "data: {\"choices\":[],\"Choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n", sse, ErrBadResponse, `duplicate key "Choices"`},
		{"stream index out of range", "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":100000,\"function\":{\"name\":\"f\"}}]}}]}\n\ndata: [DONE]\n\n", sse, ErrBadResponse, "out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := openaitest.New(t, openaitest.Func(func(openaitest.Request) openaitest.Reply {
				return openaitest.Reply{Raw: tt.body, RawContentType: tt.contentType}
			}))
			_, err := Run(t.Context(), config(srv, tt.contentType == sse), nil, "hi")
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("got %v, want %v containing %q", err, tt.want, tt.wantText)
			}
			if len(err.Error()) > 2*maxErrorMessage {
				t.Errorf("error is %d bytes long", len(err.Error()))
			}
		})
	}
}

func TestRun_ServerThatIgnoresStreamIsStillRead(t *testing.T) {
	srv := openaitest.New(t, openaitest.Func(func(openaitest.Request) openaitest.Reply {
		return openaitest.Reply{Raw: `{"choices":[{"index":0,"message":{"role":"assistant","content":"plain"},"finish_reason":"stop"}]}`}
	}))
	res, err := Run(t.Context(), config(srv, true), nil, "hi")
	if err != nil || res.Final != "plain" {
		t.Errorf("got %+v, %v", res, err)
	}
}

func TestErrorMessage(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{"openai", `{"error":{"message":"Invalid model","type":"invalid_request_error"}}`, "Invalid model"},
		{"error string", `{"error":"model not found"}`, "model not found"},
		{"vllm", `{"object":"error","message":"max context exceeded","type":"BadRequestError","code":400}`, "max context exceeded"},
		{"json without message", `{"detail":"x"}`, ""},
		{"plain text", "gateway: model endpoint not allowed\n", "gateway: model endpoint not allowed"},
		{"html", "<html><body>502</body></html>", ""},
		{"binary", "\xff\xfe\x00", ""},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := errorMessage([]byte(tt.body)); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name string
		h    http.Header
		want time.Duration
	}{
		{"none", http.Header{}, -1},
		{"seconds", http.Header{"Retry-After": {"3"}}, 3 * time.Second},
		{"zero", http.Header{"Retry-After": {"0"}}, 0},
		{"capped", http.Header{"Retry-After": {"86400"}}, maxRetryWait},
		{"negative", http.Header{"Retry-After": {"-5"}}, -1},
		{"garbage", http.Header{"Retry-After": {"soon"}}, -1},
		{"date", http.Header{"Retry-After": {now.Add(7 * time.Second).Format(http.TimeFormat)}}, 7 * time.Second},
		{"past date", http.Header{"Retry-After": {now.Add(-time.Hour).Format(http.TimeFormat)}}, 0},
		{"milliseconds first", http.Header{"Retry-After-Ms": {"250"}, "Retry-After": {"9"}}, 250 * time.Millisecond},
		{"bad milliseconds", http.Header{"Retry-After-Ms": {"NaN"}, "Retry-After": {"2"}}, 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := retryAfter(tt.h, now); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestDefaultBackoffGrows(t *testing.T) {
	for n := range maxRetries {
		d := defaultBackoff(n)
		lo := baseBackoff << n
		if d < lo || d > lo+lo/4 {
			t.Errorf("backoff %d = %s, want in [%s, %s]", n, d, lo, lo+lo/4)
		}
	}
}
