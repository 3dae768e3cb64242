package openaitest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// ChatRequest is a decoded chat-completions request body. Decoding is strict, as the OpenAI
// API is: an unknown field anywhere is refused.
type ChatRequest struct {
	Model               string          `json:"model"`
	Messages            []Message       `json:"messages"`
	Tools               []Tool          `json:"tools,omitempty"`
	ToolChoice          json.RawMessage `json:"tool_choice,omitempty"`
	ParallelToolCalls   *bool           `json:"parallel_tool_calls,omitempty"`
	Stream              *bool           `json:"stream,omitempty"`
	StreamOptions       *StreamOptions  `json:"stream_options,omitempty"`
	Temperature         *float64        `json:"temperature,omitempty"`
	TopP                *float64        `json:"top_p,omitempty"`
	MaxTokens           *int64          `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int64          `json:"max_completion_tokens,omitempty"`
	N                   *int            `json:"n,omitempty"`
	Stop                json.RawMessage `json:"stop,omitempty"`
	Seed                *int64          `json:"seed,omitempty"`
	User                string          `json:"user,omitempty"`
	ResponseFormat      json.RawMessage `json:"response_format,omitempty"`
	FrequencyPenalty    *float64        `json:"frequency_penalty,omitempty"`
	PresencePenalty     *float64        `json:"presence_penalty,omitempty"`
	Logprobs            *bool           `json:"logprobs,omitempty"`
	TopLogprobs         *int            `json:"top_logprobs,omitempty"`
	LogitBias           json.RawMessage `json:"logit_bias,omitempty"`
	Metadata            json.RawMessage `json:"metadata,omitempty"`
	Store               *bool           `json:"store,omitempty"`
	ReasoningEffort     string          `json:"reasoning_effort,omitempty"`
	ServiceTier         string          `json:"service_tier,omitempty"`
}

// Streaming reports whether the request asked for a stream.
func (r ChatRequest) Streaming() bool { return r.Stream != nil && *r.Stream }

// StreamOptions is the request's stream_options.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// Message is one message of a request.
type Message struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content,omitempty"` // a string, an array of parts, or null
	Name       string          `json:"name,omitempty"`
	ToolCalls  []ToolCall      `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	Refusal    *string         `json:"refusal,omitempty"`
}

// Text returns the message content as text: the string, or the text parts joined.
func (m Message) Text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []contentPart
	if json.Unmarshal(m.Content, &parts) == nil {
		var b strings.Builder
		for _, p := range parts {
			b.WriteString(p.Text)
		}
		return b.String()
	}
	return ""
}

type contentPart struct {
	Type     string          `json:"type"`
	Text     string          `json:"text,omitempty"`
	ImageURL json.RawMessage `json:"image_url,omitempty"`
}

// ToolCall is a tool call inside an assistant message of a request.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall names the function and carries its arguments as a JSON string.
type FunctionCall struct {
	Name      string  `json:"name"`
	Arguments *string `json:"arguments"`
}

// Tool is one entry of the request's tools.
type Tool struct {
	Type     string   `json:"type"`
	Function Function `json:"function"`
}

// Function describes an offered function.
type Function struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// ToolResult returns the content of the tool message answering the call id.
func (r ChatRequest) ToolResult(id string) (string, bool) {
	for _, m := range r.Messages {
		if m.Role == "tool" && m.ToolCallID == id {
			return m.Text(), true
		}
	}
	return "", false
}

// ToolNames returns the names of the offered tools, in order.
func (r ChatRequest) ToolNames() []string {
	names := make([]string, 0, len(r.Tools))
	for _, t := range r.Tools {
		names = append(names, t.Function.Name)
	}
	return names
}

// apiError is the 400 the API returns for a request it refuses.
type apiError struct {
	Status  int
	Message string
	Param   string
	Code    string
}

func (e *apiError) Error() string { return e.Message }

func invalid(param, format string, args ...any) *apiError {
	return &apiError{Status: 400, Message: fmt.Sprintf(format, args...), Param: param}
}

var (
	toolName    = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	unknownWord = regexp.MustCompile(`unknown field "([^"]*)"`)
	roles       = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true, "tool": true}
)

// decodeRequest parses and validates a request body as the API does, with the API's
// messages.
func decodeRequest(body []byte) (ChatRequest, *apiError) {
	var r ChatRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		if m := unknownWord.FindStringSubmatch(err.Error()); m != nil {
			return r, invalid(m[1], "Unrecognized request argument supplied: %s", m[1])
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return r, invalid(te.Field, "Invalid type for '%s': expected %s, but got %s.", te.Field, te.Type, te.Value)
		}
		return r, invalid("", "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)")
	}
	if dec.More() {
		return r, invalid("", "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)")
	}
	if r.Model == "" {
		return r, invalid("model", "you must provide a model parameter")
	}
	if len(r.Messages) == 0 {
		return r, invalid("messages", "[] is too short - 'messages'")
	}
	if err := validateTools(r); err != nil {
		return r, err
	}
	if r.StreamOptions != nil && !r.Streaming() {
		return r, invalid("stream_options", "The 'stream_options' parameter is only allowed when 'stream' is enabled.")
	}
	return r, validateMessages(r.Messages)
}

func validateTools(r ChatRequest) *apiError {
	for i, t := range r.Tools {
		p := fmt.Sprintf("tools[%d]", i)
		if t.Type != "function" {
			return invalid(p+".type", "Invalid value: '%s'. Supported values are: 'function' and 'custom'.", t.Type)
		}
		if !toolName.MatchString(t.Function.Name) {
			return invalid(p+".function.name", "Invalid '%s.function.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.", p)
		}
		if len(t.Function.Parameters) > 0 && !isObject(t.Function.Parameters) {
			return invalid(p+".function.parameters", "Invalid type for '%s.function.parameters': expected an object, but got %s instead.", p, kind(t.Function.Parameters))
		}
	}
	if len(r.ToolChoice) == 0 {
		return nil
	}
	if len(r.Tools) == 0 {
		return invalid("tool_choice", "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.")
	}
	var s string
	if json.Unmarshal(r.ToolChoice, &s) == nil {
		if s != "none" && s != "auto" && s != "required" {
			return invalid("tool_choice", "Invalid value: '%s'. Supported values are: 'none', 'auto', and 'required'.", s)
		}
		return nil
	}
	var obj struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if json.Unmarshal(r.ToolChoice, &obj) != nil || obj.Type != "function" || obj.Function.Name == "" {
		return invalid("tool_choice", "Invalid value for 'tool_choice'.")
	}
	return nil
}

// validateMessages checks each message and that tool messages answer, exactly once, the
// tool calls of the assistant message right before them.
func validateMessages(msgs []Message) *apiError {
	pending := map[string]bool{} // calls of the last assistant message not yet answered
	var order []string
	unanswered := func() *apiError {
		var ids []string
		for _, id := range order {
			if pending[id] {
				ids = append(ids, id)
			}
		}
		if len(ids) == 0 {
			return nil
		}
		return invalid("messages", "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: %s", strings.Join(ids, ", "))
	}
	for i, m := range msgs {
		p := fmt.Sprintf("messages.[%d]", i)
		if !roles[m.Role] {
			return invalid(p+".role", "Invalid value: '%s'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'.", m.Role)
		}
		if m.Role != "assistant" && len(m.ToolCalls) > 0 {
			// Only an assistant calls tools; a call on any other message would be one no
			// tool message may answer (a fake that takes it hides a bug from the fuzz targets).
			return invalid(p+".tool_calls", "Invalid parameter: only messages with role 'assistant' can have 'tool_calls'.")
		}
		if m.Role != "tool" {
			if err := unanswered(); err != nil {
				return err
			}
			clear(pending)
			order = order[:0]
		}
		switch m.Role {
		case "system", "developer", "user":
			if err := textContent(p, m.Content, m.Role == "user"); err != nil {
				return err
			}
		case "assistant":
			if len(m.ToolCalls) == 0 {
				if err := textContent(p, m.Content, false); err != nil {
					return err
				}
			} else if !isNull(m.Content) {
				if err := textContent(p, m.Content, false); err != nil {
					return err
				}
			}
			for j, tc := range m.ToolCalls {
				q := fmt.Sprintf("%s.tool_calls.[%d]", p, j)
				switch {
				case tc.ID == "":
					return invalid(q+".id", "Missing required parameter: '%s.id'.", q)
				case tc.Type != "function":
					return invalid(q+".type", "Invalid value: '%s'. Supported values are: 'function'.", tc.Type)
				case tc.Function.Name == "":
					return invalid(q+".function.name", "Missing required parameter: '%s.function.name'.", q)
				case tc.Function.Arguments == nil:
					return invalid(q+".function.arguments", "Missing required parameter: '%s.function.arguments'.", q)
				}
				if !pending[tc.ID] {
					order = append(order, tc.ID)
				}
				pending[tc.ID] = true
			}
		case "tool":
			if m.ToolCallID == "" {
				return invalid(p+".tool_call_id", "Missing required parameter: '%s.tool_call_id'.", p)
			}
			if err := textContent(p, m.Content, false); err != nil {
				return err
			}
			if !pending[m.ToolCallID] {
				return invalid(p+".role", "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.")
			}
			pending[m.ToolCallID] = false
		}
	}
	return unanswered()
}

// textContent checks content is a string or an array of parts (images only for users).
func textContent(p string, content json.RawMessage, images bool) *apiError {
	if len(content) == 0 {
		return invalid(p+".content", "Missing required parameter: '%s.content'.", p)
	}
	if isNull(content) {
		return invalid(p+".content", "Invalid value for '%s.content': expected a string, got null.", p)
	}
	var s string
	if json.Unmarshal(content, &s) == nil {
		return nil
	}
	var parts []contentPart
	if json.Unmarshal(content, &parts) != nil {
		return invalid(p+".content", "Invalid type for '%s.content': expected one of a string or array of objects, but got %s instead.", p, kind(content))
	}
	for j, part := range parts {
		if part.Type == "text" || (images && part.Type == "image_url") {
			continue
		}
		return invalid(fmt.Sprintf("%s.content.[%d].type", p, j), "Invalid value: '%s'. Supported values are: 'text'.", part.Type)
	}
	return nil
}

func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(bytes.TrimSpace(raw)) == "null"
}

func isObject(raw json.RawMessage) bool {
	var v map[string]json.RawMessage
	return json.Unmarshal(raw, &v) == nil && v != nil
}

// kind names the JSON type of raw as the API's messages do.
func kind(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '"':
		return "a string"
	case '[':
		return "an array"
	case '{':
		return "an object"
	case 'n':
		return "null"
	case 't', 'f':
		return "a boolean"
	default:
		return "a number"
	}
}
