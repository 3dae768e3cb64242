package openairt

import (
	"errors"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
)

func TestReadSSE(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
	}{
		{"LF", "data: a\n\ndata: b\n\n", []string{"a", "b"}},
		{"CRLF", "data: a\r\n\r\ndata: b\r\n\r\n", []string{"a", "b"}},
		{"CR", "data: a\r\rdata: b\r\r", []string{"a", "b"}},
		{"no space after colon", "data:a\n\n", []string{"a"}},
		{"only one space is stripped", "data:  a\n\n", []string{" a"}},
		{"multi-line data joins with LF", "data: a\ndata: b\n\n", []string{"a\nb"}},
		{"comments and other fields are ignored", ": ping\nevent: message\nid: 7\nretry: 10\ndata: a\n\n", []string{"a"}},
		{"blank lines alone dispatch nothing", "\n\n\ndata: a\n\n\n", []string{"a"}},
		{"pending event at end of input", "data: a", []string{"a"}},
		{"field without colon", "data\n\n", []string{""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, oneByte := range []bool{false, true} {
				r := strings.NewReader(tt.in)
				var got []string
				var err error
				if oneByte {
					err = readSSE(iotest.OneByteReader(r), 1024, func(d []byte) error { got = append(got, string(d)); return nil })
				} else {
					err = readSSE(r, 1024, func(d []byte) error { got = append(got, string(d)); return nil })
				}
				if err != nil {
					t.Fatalf("readSSE: %v", err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("one byte at a time %v: events (-want +got):\n%s", oneByte, diff)
				}
			}
		})
	}
}

func TestReadSSE_Limits(t *testing.T) {
	long := "data: " + strings.Repeat("x", 100) + "\n\n"
	if err := readSSE(strings.NewReader(long), 64, func([]byte) error { return nil }); !errors.Is(err, ErrResponseTooLarge) {
		t.Errorf("long line: got %v, want ErrResponseTooLarge", err)
	}
	many := strings.Repeat("data: "+strings.Repeat("x", 40)+"\n", 4) + "\n"
	if err := readSSE(strings.NewReader(many), 64, func([]byte) error { return nil }); !errors.Is(err, ErrResponseTooLarge) {
		t.Errorf("long event: got %v, want ErrResponseTooLarge", err)
	}
}

func TestDecodeStream(t *testing.T) {
	tests := []struct {
		name, in string
		want     completion
	}{
		{
			"calls without an index (older servers)",
			`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"id":"a","function":{"name":"f","arguments":"{\"x\""}}]}}]}` + "\n\n" +
				`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"arguments":":1}"}}]}}]}` + "\n\n" +
				`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"id":"b","function":{"name":"g","arguments":"{}"}}]}}]}` + "\n\n" +
				`data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\ndata: [DONE]\n\n",
			completion{FinishReason: "tool_calls", ToolCalls: []toolCall{
				{ID: "a", Type: "function", Function: functionCall{Name: "f", Arguments: `{"x":1}`}},
				{ID: "b", Type: "function", Function: functionCall{Name: "g", Arguments: `{}`}},
			}},
		},
		{
			"calls out of order come back by index",
			`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"b","function":{"name":"g","arguments":"{}"}},{"index":0,"id":"a","function":{"name":"f","arguments":"{}"}}]}}]}` + "\n\n" +
				`data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\ndata: [DONE]\n\n",
			completion{FinishReason: "tool_calls", ToolCalls: []toolCall{
				{ID: "a", Type: "function", Function: functionCall{Name: "f", Arguments: `{}`}},
				{ID: "b", Type: "function", Function: functionCall{Name: "g", Arguments: `{}`}},
			}},
		},
		{
			"other choices are ignored, usage is read, nothing after [DONE]",
			`data: {"choices":[{"index":1,"delta":{"content":"no"}},{"index":0,"delta":{"content":"yes"}}]}` + "\n\n" +
				`data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
				`data: {"choices":[],"usage":{"prompt_tokens":-4,"completion_tokens":2}}` + "\n\ndata: [DONE]\n\ndata: {garbage\n\n",
			completion{Content: "yes", FinishReason: "stop", Usage: &usage{0, 2}},
		},
		{
			"end of input after a finish reason, without [DONE]",
			`data: {"choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}` + "\n\n",
			completion{Content: "ok", FinishReason: "stop"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeStream(strings.NewReader(tt.in), 1<<16)
			if err != nil {
				t.Fatalf("decodeStream: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodeStream_ManyTinyFragments(t *testing.T) {
	var b strings.Builder
	b.WriteString(`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":""}}]}}]}` + "\n\n")
	const n = 20_000
	for range n {
		b.WriteString(`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"x"}}]}}]}` + "\n\n")
	}
	b.WriteString(`data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\ndata: [DONE]\n\n")
	got, err := decodeStream(strings.NewReader(b.String()), 1<<16)
	if err != nil || len(got.ToolCalls) != 1 || len(got.ToolCalls[0].Function.Arguments) != n {
		t.Fatalf("got %d calls, %v", len(got.ToolCalls), err)
	}
}
