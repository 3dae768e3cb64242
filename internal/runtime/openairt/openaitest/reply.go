package openaitest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"unicode/utf8"
)

// The reply shapes below follow the API's own field order and nulls.

type completionJSON struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	Choices           []choiceJSON `json:"choices"`
	Usage             *usageJSON   `json:"usage,omitempty"`
	ServiceTier       string       `json:"service_tier"`
	SystemFingerprint string       `json:"system_fingerprint"`
}

type choiceJSON struct {
	Index        int         `json:"index"`
	Message      messageJSON `json:"message"`
	Logprobs     *struct{}   `json:"logprobs"`
	FinishReason string      `json:"finish_reason"`
}

type messageJSON struct {
	Role        string         `json:"role"`
	Content     *string        `json:"content"`
	Refusal     *string        `json:"refusal"`
	ToolCalls   []toolCallJSON `json:"tool_calls,omitempty"`
	Annotations []struct{}     `json:"annotations"`
}

type toolCallJSON struct {
	ID       string           `json:"id"`
	Type     string           `json:"type"`
	Function functionCallJSON `json:"function"`
}

type functionCallJSON struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type usageJSON struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

type chunkJSON struct {
	ID                string            `json:"id"`
	Object            string            `json:"object"`
	Created           int64             `json:"created"`
	Model             string            `json:"model"`
	ServiceTier       string            `json:"service_tier"`
	SystemFingerprint string            `json:"system_fingerprint"`
	Choices           []chunkChoiceJSON `json:"choices"`
	Usage             json.RawMessage   `json:"usage,omitempty"` // null on every chunk but the last, when asked for
}

type chunkChoiceJSON struct {
	Index        int       `json:"index"`
	Delta        deltaJSON `json:"delta"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
}

type deltaJSON struct {
	Role      string              `json:"role,omitempty"`
	Content   json.RawMessage     `json:"content,omitempty"`
	Refusal   json.RawMessage     `json:"refusal,omitempty"`
	ToolCalls []toolCallDeltaJSON `json:"tool_calls,omitempty"`
}

type toolCallDeltaJSON struct {
	Index    int               `json:"index"`
	ID       string            `json:"id,omitempty"`
	Type     string            `json:"type,omitempty"`
	Function functionDeltaJSON `json:"function"`
}

type functionDeltaJSON struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// completion is a reply with its defaults filled in.
type completion struct {
	id     string
	reply  Reply
	finish string
	usage  *usageJSON
}

func (s *Server) complete(req ChatRequest, r Reply) completion {
	s.mu.Lock()
	s.calls++
	n := s.calls
	calls := make([]Call, len(r.ToolCalls))
	for i, c := range r.ToolCalls {
		if c.ID == "" {
			s.calls++
			c.ID = "call_" + strconv.Itoa(s.calls)
		}
		calls[i] = c
	}
	s.mu.Unlock()
	r.ToolCalls = calls
	c := completion{id: "chatcmpl-openaitest" + strconv.Itoa(n), reply: r, finish: r.FinishReason}
	if c.finish == "" {
		c.finish = "stop"
		if len(calls) > 0 {
			c.finish = "tool_calls"
		}
	}
	if !r.OmitUsage {
		u := r.Usage
		if u == nil {
			out := len(r.Content)
			for _, tc := range calls {
				out += len(tc.Name) + len(tc.Arguments)
			}
			u = &Usage{PromptTokens: 10 * int64(len(req.Messages)), CompletionTokens: 1 + int64(out/4)}
		}
		c.usage = &usageJSON{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.PromptTokens + u.CompletionTokens}
	}
	return c
}

func (s *Server) writeJSON(w http.ResponseWriter, req ChatRequest, c completion) {
	msg := messageJSON{Role: "assistant", Annotations: []struct{}{}}
	if c.reply.Content != "" || len(c.reply.ToolCalls) == 0 {
		msg.Content = &c.reply.Content
	}
	for _, tc := range c.reply.ToolCalls {
		msg.ToolCalls = append(msg.ToolCalls, toolCallJSON{ID: tc.ID, Type: "function", Function: functionCallJSON{Name: tc.Name, Arguments: tc.Arguments}})
	}
	body := completionJSON{
		ID: c.id, Object: "chat.completion", Created: s.now().Unix(), Model: req.Model,
		Choices:     []choiceJSON{{Index: 0, Message: msg, FinishReason: c.finish}},
		Usage:       c.usage,
		ServiceTier: "default", SystemFingerprint: "fp_openaitest",
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(body)
}

// writeStream sends c as the API streams it: a role chunk, the content in pieces, each tool
// call as a header chunk (id, name) followed by argument fragments, a finish chunk, the usage
// chunk when the request asked for it, then [DONE]. Pieces cycle through 1, 2, 3, 5 and 7
// runes so fragments end inside JSON strings, keys and escapes alike.
func (s *Server) writeStream(w http.ResponseWriter, req ChatRequest, c completion) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	flusher, _ := w.(http.Flusher)
	includeUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	created := s.now().Unix()
	send := func(choices []chunkChoiceJSON, usage json.RawMessage) {
		ch := chunkJSON{ID: c.id, Object: "chat.completion.chunk", Created: created, Model: req.Model,
			ServiceTier: "default", SystemFingerprint: "fp_openaitest", Choices: choices, Usage: usage}
		if includeUsage && usage == nil {
			ch.Usage = json.RawMessage("null")
		}
		b, _ := json.Marshal(ch)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	delta := func(d deltaJSON) { send([]chunkChoiceJSON{{Delta: d}}, nil) }

	first := deltaJSON{Role: "assistant", Content: jsonString(""), Refusal: json.RawMessage("null")}
	if c.reply.Content == "" && len(c.reply.ToolCalls) > 0 {
		first.Content = json.RawMessage("null")
	}
	delta(first)
	for _, piece := range pieces(c.reply.Content) {
		delta(deltaJSON{Content: jsonString(piece)})
	}
	for i, tc := range c.reply.ToolCalls {
		delta(deltaJSON{ToolCalls: []toolCallDeltaJSON{{Index: i, ID: tc.ID, Type: "function", Function: functionDeltaJSON{Name: tc.Name}}}})
		for _, piece := range pieces(tc.Arguments) {
			delta(deltaJSON{ToolCalls: []toolCallDeltaJSON{{Index: i, Function: functionDeltaJSON{Arguments: piece}}}})
		}
	}
	finish := c.finish
	send([]chunkChoiceJSON{{Delta: deltaJSON{}, FinishReason: &finish}}, nil)
	if includeUsage && c.usage != nil {
		b, _ := json.Marshal(c.usage)
		send([]chunkChoiceJSON{}, b)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	if flusher != nil {
		flusher.Flush()
	}
}

// pieces splits s on rune boundaries into pieces of 1, 2, 3, 5, 7, 1, ... runes.
func pieces(s string) []string {
	sizes := [...]int{1, 2, 3, 5, 7}
	var out []string
	for k := 0; s != ""; k++ {
		n, i := sizes[k%len(sizes)], 0
		for ; n > 0 && i < len(s); n-- {
			_, w := utf8.DecodeRuneInString(s[i:])
			i += w
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return out
}

func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// writeError answers the API's error body.
func writeError(w http.ResponseWriter, e *apiError) {
	typ := "invalid_request_error"
	switch {
	case e.Status == http.StatusTooManyRequests:
		typ = "requests"
	case e.Status >= 500:
		typ = "server_error"
	}
	body := struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    *string `json:"code"`
		} `json:"error"`
	}{}
	body.Error.Message, body.Error.Type = e.Message, typ
	if e.Param != "" {
		body.Error.Param = &e.Param
	}
	if e.Code != "" {
		body.Error.Code = &e.Code
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(body)
}
