// Package anthropictest is a faithful fake of the Anthropic Messages API for tests and
// benchmarks that drive a real client (the Claude Code CLI) through agora: POST /v1/messages
// answered as JSON or, when the request asks for "stream": true, as the server-sent events the
// real API sends (message_start, ping, content_block_start / _delta / _stop with text_delta
// and input_json_delta, message_delta with stop_reason and usage, message_stop), with usage
// (input, output, cache tokens) in both. Errors have the API's shape
// ({"type":"error","error":{"type","message"}}); a request without the expected x-api-key is
// answered 401 authentication_error. HEAD / is answered 200, as the real host does.
//
// Replies are scripted per conversation turn: a request whose messages hold n assistant
// turns gets the Script's answer for turn n (so a client's side requests, which carry no
// tools, do not shift the script). Every request is kept for the test to inspect.
package anthropictest

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
)

// Block is one content block of a reply: text, or a tool_use with its input as JSON.
type Block struct {
	Type  string          `json:"type"` // "text" or "tool_use"
	Text  string          `json:"text,omitempty"`
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
}

// Text is a text block.
func Text(s string) Block { return Block{Type: "text", Text: s} }

// ToolUse is a tool_use block; input is the tool's arguments as a JSON object.
func ToolUse(id, name, input string) Block {
	return Block{Type: "tool_use", ID: id, Name: name, Input: json.RawMessage(input)}
}

// Usage is what a reply reports it cost.
type Usage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
}

// Reply is the model's answer to one request.
type Reply struct {
	Blocks []Block
	Usage  Usage // zero: 100 input tokens, 10 output tokens
}

// Request is one request the server received.
type Request struct {
	Method, Path string
	Header       http.Header
	Body         []byte
	Model        string
	Stream       bool
	Tools        []string // the names of the tools it offered
	Turn         int      // assistant turns in its messages
}

// Script answers a request; nil answers every turn with Text("done").
type Script func(Request) Reply

// Turns answers turn n with replies[n], and later turns with Text("done").
func Turns(replies ...Reply) Script {
	return func(r Request) Reply {
		if len(r.Tools) > 0 && r.Turn < len(replies) {
			return replies[r.Turn]
		}
		return Reply{Blocks: []Block{Text("done")}}
	}
}

// Server is a running fake.
type Server struct {
	URL string // http://127.0.0.1:PORT, the base URL (the client appends /v1/messages)

	key    string
	script Script
	srv    *http.Server
	ln     net.Listener

	mu   sync.Mutex
	reqs []Request
}

// Start serves the fake on a loopback port. key is the x-api-key it requires ("" accepts
// any request).
func Start(key string, script Script) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	if script == nil {
		script = Turns()
	}
	s := &Server{URL: "http://" + ln.Addr().String(), key: key, script: script, ln: ln}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve)}
	go s.srv.Serve(ln)
	return s, nil
}

// Close stops the server.
func (s *Server) Close() error { return s.srv.Close() }

// Requests returns what the server received, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// maxBody caps a request body the fake reads.
const maxBody = 32 << 20

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, maxBody))
	req := Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	var parsed struct {
		Model    string `json:"model"`
		Stream   bool   `json:"stream"`
		Messages []struct {
			Role string `json:"role"`
		} `json:"messages"`
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	jsonErr := json.Unmarshal(body, &parsed)
	req.Model, req.Stream = parsed.Model, parsed.Stream
	for _, m := range parsed.Messages {
		if m.Role == "assistant" {
			req.Turn++
		}
	}
	for _, t := range parsed.Tools {
		req.Tools = append(req.Tools, t.Name)
	}
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	s.mu.Unlock()

	switch {
	case r.Method == http.MethodHead && r.URL.Path == "/":
		w.WriteHeader(http.StatusOK)
		return
	case r.Method != http.MethodPost || r.URL.Path != "/v1/messages":
		apiError(w, http.StatusNotFound, "not_found_error", "Not found: "+r.Method+" "+r.URL.Path)
		return
	case s.key != "" && r.Header.Get("X-Api-Key") != s.key:
		apiError(w, http.StatusUnauthorized, "authentication_error", "invalid x-api-key")
		return
	case jsonErr != nil || parsed.Model == "" || len(parsed.Messages) == 0:
		apiError(w, http.StatusBadRequest, "invalid_request_error", "request body must be JSON with model and messages")
		return
	}
	reply := s.script(req)
	if reply.Usage == (Usage{}) {
		reply.Usage = Usage{InputTokens: 100, OutputTokens: 10}
	}
	id := fmt.Sprintf("msg_fake%04d", len(s.Requests()))
	if req.Stream {
		stream(w, id, parsed.Model, reply)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": parsed.Model,
		"content": contentJSON(reply.Blocks), "stop_reason": stopReason(reply.Blocks), "stop_sequence": nil,
		"usage": reply.Usage,
	})
}

func apiError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
}

func stopReason(blocks []Block) string {
	for _, b := range blocks {
		if b.Type == "tool_use" {
			return "tool_use"
		}
	}
	return "end_turn"
}

func contentJSON(blocks []Block) []map[string]any {
	out := []map[string]any{}
	for _, b := range blocks {
		if b.Type == "tool_use" {
			out = append(out, map[string]any{"type": "tool_use", "id": b.ID, "name": b.Name, "input": b.Input})
		} else {
			out = append(out, map[string]any{"type": "text", "text": b.Text})
		}
	}
	return out
}

// stream writes reply as the API's server-sent events. Text and tool input arrive in several
// deltas, as from the real API, so a client that takes one delta for the whole fails.
func stream(w http.ResponseWriter, id, model string, reply Reply) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	fl, _ := w.(http.Flusher)
	ev := func(typ string, data map[string]any) {
		data["type"] = typ
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b)
		if fl != nil {
			fl.Flush()
		}
	}
	start := reply.Usage
	start.OutputTokens = 1
	ev("message_start", map[string]any{"message": map[string]any{"id": id, "type": "message", "role": "assistant",
		"model": model, "content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": start}})
	ev("ping", map[string]any{})
	for i, b := range reply.Blocks {
		if b.Type == "tool_use" {
			ev("content_block_start", map[string]any{"index": i, "content_block": map[string]any{
				"type": "tool_use", "id": b.ID, "name": b.Name, "input": map[string]any{}}})
			for _, part := range split(string(b.Input)) {
				ev("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": part}})
			}
		} else {
			ev("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			for _, part := range split(b.Text) {
				ev("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "text_delta", "text": part}})
			}
		}
		ev("content_block_stop", map[string]any{"index": i})
	}
	ev("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stopReason(reply.Blocks), "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": reply.Usage.OutputTokens}})
	ev("message_stop", map[string]any{})
}

// split cuts s into up to three parts at rune boundaries ("" stays one empty part).
func split(s string) []string {
	if len(s) < 3 {
		return []string{s}
	}
	var parts []string
	rs := []rune(s)
	n := (len(rs) + 2) / 3
	for i := 0; i < len(rs); i += n {
		parts = append(parts, string(rs[i:min(i+n, len(rs))]))
	}
	return parts
}

// Bodies returns every request body, joined by newlines: for a quick search.
func (s *Server) Bodies() string {
	var b strings.Builder
	for _, r := range s.Requests() {
		b.Write(r.Body)
		b.WriteByte('\n')
	}
	return b.String()
}
