package openairt

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agora-dev/agora/internal/strictjson"
)

// The chat-completions wire format, as much of it as the loop sends and reads. Replies are
// decoded leniently about fields the loop does not use (servers add their own) and strictly
// about the ones it does, exactly (strictjson.UnmarshalKnown: no two keys equal under case
// folding, no key that only folds to a field's name): a tool call's arguments MUST be a JSON string, content a string or
// null.

// chatRequest is the body of POST {BaseURL}/chat/completions.
type chatRequest struct {
	Model         string         `json:"model"`
	Messages      []message      `json:"messages"`
	Tools         []toolDef      `json:"tools,omitempty"`
	ToolChoice    string         `json:"tool_choice,omitempty"`
	Stream        bool           `json:"stream,omitempty"`
	StreamOptions *streamOptions `json:"stream_options,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type toolDef struct {
	Type     string      `json:"type"` // always "function"
	Function functionDef `json:"function"`
}

type functionDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

// message is one entry of the conversation. Content is null on an assistant message that
// carries only tool calls, as the API itself returns it.
type message struct {
	Role       string     `json:"role"`
	Content    *string    `json:"content"`
	ToolCalls  []toolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

type toolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function functionCall `json:"function"`
}

type functionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"` // JSON text, as the model wrote it
}

// usage is the token accounting a server reports; a field it leaves out reads as 0.
type usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
}

// completion is one assistant reply, decoded from either form.
type completion struct {
	Content      string
	ToolCalls    []toolCall
	FinishReason string
	Usage        *usage // nil when the server reported none
}

// chatResponse is a non-streaming reply.
type chatResponse struct {
	Choices []struct {
		Index   int `json:"index"`
		Message struct {
			Content   *string    `json:"content"`
			ToolCalls []toolCall `json:"tool_calls"`
		} `json:"message"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *usage    `json:"usage"`
	Error *apiError `json:"error"`
}

// apiError is the error object of an OpenAI-style error body, also sent inside a stream.
type apiError struct {
	Message string `json:"message"`
}

// ErrBadResponse means the model endpoint answered 2xx with a body that is not a valid
// chat completion (malformed JSON, no choices, a tool call without a name, too many calls).
var ErrBadResponse = errors.New("malformed chat completion")

// maxToolCalls bounds the tool calls of one assistant message.
const maxToolCalls = 128

// decodeResponse decodes a non-streaming chat completion.
func decodeResponse(b []byte) (completion, error) {
	var r chatResponse
	if err := strictjson.UnmarshalKnown(b, &r); err != nil {
		return completion{}, fmt.Errorf("%w: %s", ErrBadResponse, jsonProblem(err))
	}
	if r.Error != nil {
		return completion{}, fmt.Errorf("%w: server error: %s", ErrBadResponse, bounded(r.Error.Message))
	}
	if len(r.Choices) == 0 {
		return completion{}, fmt.Errorf("%w: no choices", ErrBadResponse)
	}
	ch := r.Choices[0]
	for _, c := range r.Choices {
		if c.Index == 0 {
			ch = c
			break
		}
	}
	var c completion
	if ch.Message.Content != nil {
		c.Content = *ch.Message.Content
	}
	if ch.FinishReason != nil {
		c.FinishReason = *ch.FinishReason
	}
	if len(ch.Message.ToolCalls) > maxToolCalls {
		return completion{}, fmt.Errorf("%w: %d tool calls, limit %d", ErrBadResponse, len(ch.Message.ToolCalls), maxToolCalls)
	}
	for i, tc := range ch.Message.ToolCalls {
		if tc.Function.Name == "" {
			return completion{}, fmt.Errorf("%w: tool call %d has no name", ErrBadResponse, i)
		}
	}
	c.ToolCalls = ch.Message.ToolCalls
	c.Usage = clean(r.Usage)
	return c, nil
}

// clean drops negative counts a broken server might report.
func clean(u *usage) *usage {
	if u == nil {
		return nil
	}
	v := *u
	v.PromptTokens = max(v.PromptTokens, 0)
	v.CompletionTokens = max(v.CompletionTokens, 0)
	return &v
}

// jsonProblem describes a decode error without quoting the body (strictjson's errors name a
// key, cut short, and where it is: a reply with two keys equal under case folding, or one
// that only folds to a field, is refused rather than read one way by the loop and another by
// a case-sensitive reader of the transcript).
func jsonProblem(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("invalid JSON at offset %d", se.Offset)
	case errors.As(err, &te):
		return fmt.Sprintf("field %q: got JSON %s, want %s", te.Field, te.Value, te.Type)
	default:
		return "not one exact JSON reading: " + bounded(err.Error())
	}
}

// objectArgs reports whether args (trimmed) is a JSON object.
func objectArgs(args []byte) bool {
	args = bytes.TrimSpace(args)
	return len(args) > 0 && args[0] == '{' && json.Valid(args)
}
