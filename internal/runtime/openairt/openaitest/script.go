package openaitest

import (
	"net/http"
	"time"
)

// Reply is what the model answers to one request.
type Reply struct {
	// Content is the assistant's text.
	Content string
	// ToolCalls are the calls the model makes; an empty ID is filled in (call_<n>).
	ToolCalls []Call
	// FinishReason defaults to "tool_calls" with tool calls, else "stop".
	FinishReason string
	// Usage overrides the computed usage (10 prompt tokens per message, 1 + a quarter of the
	// reply's bytes for the completion). OmitUsage leaves usage out of the reply.
	Usage     *Usage
	OmitUsage bool

	// Status, when not 0 or 200, answers with the API's error body carrying Message.
	Status  int
	Message string
	// Header is added to the reply (e.g. Retry-After).
	Header http.Header
	// Raw, when set, is sent verbatim as the body with RawContentType, to test broken
	// servers.
	Raw            string
	RawContentType string
	// Delay holds the reply back (until the client gives up, if sooner).
	Delay time.Duration
}

// Call is one tool call in a [Reply].
type Call struct {
	ID        string
	Name      string
	Arguments string // JSON text, sent as the model wrote it (it may be invalid on purpose)
}

// Usage is the token accounting of a reply.
type Usage struct {
	PromptTokens, CompletionTokens int64
}

// Step decides the reply to one request. A step is used once, unless it repeats.
type Step struct {
	reply  func(Request) Reply
	repeat bool
}

// Func is a step that computes the reply from the request (assert on it inside).
func Func(f func(req Request) Reply) Step { return Step{reply: f} }

// Say is a step that answers text and stops.
func Say(text string) Step {
	return Func(func(Request) Reply { return Reply{Content: text} })
}

// CallTool is a step that calls one tool with args (JSON text, sent as is).
func CallTool(name, args string) Step {
	return CallTools(Call{Name: name, Arguments: args})
}

// CallTools is a step that makes several tool calls in one message.
func CallTools(calls ...Call) Step {
	return Func(func(Request) Reply { return Reply{ToolCalls: calls} })
}

// Repeat makes s answer every request from now on; steps after it are never reached.
func Repeat(s Step) Step {
	s.repeat = true
	return s
}

// Loop is a step that always calls a tool: the first tool offered, with {} (or "loop" when
// none is offered). It never finishes, for budget tests.
func Loop() Step {
	return Repeat(Func(func(req Request) Reply {
		name := "loop"
		if len(req.Body.Tools) > 0 {
			name = req.Body.Tools[0].Function.Name
		}
		return Reply{ToolCalls: []Call{{Name: name, Arguments: "{}"}}}
	}))
}
