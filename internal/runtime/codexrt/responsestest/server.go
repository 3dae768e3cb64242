// Package responsestest is a faithful fake of the OpenAI Responses API for tests and
// benchmarks that drive a real client (the Codex CLI) through agora: POST /v1/responses
// answered, when the request asks for "stream": true, with the server-sent events the real API
// sends (response.created, response.in_progress, then per output item
// response.output_item.added, the function call's response.function_call_arguments.delta /
// .done, the custom tool call's (apply_patch) response.custom_tool_call_input.delta / .done,
// or the message's response.content_part.added, response.output_text.delta / .done and
// response.content_part.done, then response.output_item.done, and last response.completed
// with usage), and as one response object otherwise. Arguments and text arrive in several
// deltas, as from the real API. A request without "Authorization: Bearer <key>" is answered
// 401 with the API's error body; a malformed one 400; a function_call_output answering no
// function call before it 400, as the API does.
//
// Replies are scripted per conversation turn: a request whose input holds n model items
// (function calls and assistant messages, which a stateless client such as Codex sends back
// each turn) gets the Script's answer for turn n. Every request is kept for the test.
//
// It is test-only code; nothing outside a _test.go file may import it.
package responsestest

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
)

// Path is where the API serves responses; a client's base URL ends in /v1.
const Path = "/v1/responses"

// Call is a function call the model makes; Arguments is JSON text, sent as written. A
// Custom call is a call of a custom (free-form) tool, such as Codex's apply_patch: its
// Arguments are the tool's raw input text, sent as the item's "input".
type Call struct {
	Name, Arguments string
	Custom          bool
}

// Usage is what a reply reports it cost.
type Usage struct {
	InputTokens, CachedTokens, OutputTokens, ReasoningTokens int64
}

// Reply is the model's answer to one request: function calls, then (or instead) text.
type Reply struct {
	Calls []Call
	Text  string
	Usage Usage // zero: 100 input tokens, 10 output tokens
	// Status, when not 0 or 200, answers with the API's error body carrying Message.
	Status  int
	Message string
	// Rewrite, when not nil, is given each streamed event's data (one line of JSON, as the
	// API writes it) and returns what is sent instead: a test of a hostile model's stream
	// (duplicate keys, an event the API never sends) rewrites a faithful one. Returning ""
	// drops the event.
	Rewrite func(data string) string
}

// Exec is a reply calling Codex's exec_command tool with {"cmd": cmd}.
func Exec(cmd string) Reply {
	return Reply{Calls: []Call{{Name: "exec_command", Arguments: string(marshal(map[string]string{"cmd": cmd}))}}}
}

// Patch is a reply calling Codex's apply_patch custom tool with patch, in the patch format
// its grammar defines ("*** Begin Patch" ... "*** End Patch").
func Patch(patch string) Reply {
	return Reply{Calls: []Call{{Name: "apply_patch", Arguments: patch, Custom: true}}}
}

// Say is a reply of text only: the end of the model's turn.
func Say(text string) Reply { return Reply{Text: text} }

// Request is one request the server received.
type Request struct {
	Method, Path string
	Header       http.Header
	Body         []byte
	Model        string
	Stream       bool
	Tools        []string // the names of the tools offered
	Turn         int      // model items in the input
	// Outputs are the function_call_output items of the input, by call_id.
	Outputs map[string]string
	// Rejected is the error message of a refused request; "" when answered by the script.
	Rejected string
}

// Script answers a request.
type Script func(Request) Reply

// Turns answers turn n with replies[n], and later turns with Say("done").
func Turns(replies ...Reply) Script {
	return func(r Request) Reply {
		if r.Turn < len(replies) {
			return replies[r.Turn]
		}
		return Say("done")
	}
}

// Server is a running fake.
type Server struct {
	URL string // http://127.0.0.1:PORT/v1, the base URL (the client appends /responses)

	key    string
	script Script
	srv    *http.Server

	mu   sync.Mutex
	reqs []Request
	n    int
}

// Start serves the fake on a loopback port. key is the bearer token it requires ("" accepts
// any request); a nil script answers every turn Say("done").
func Start(key string, script Script) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	if script == nil {
		script = Turns()
	}
	s := &Server{URL: "http://" + ln.Addr().String() + "/v1", key: key, script: script}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve)}
	go s.srv.Serve(ln)
	return s, nil
}

// Close stops the server.
func (s *Server) Close() error { return s.srv.Close() }

// Requests returns what the server received, refused requests included, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
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

// maxBody caps a request body the fake reads.
const maxBody = 32 << 20

// wireRequest is the part of a request body the fake reads.
type wireRequest struct {
	Model  string          `json:"model"`
	Stream bool            `json:"stream"`
	Input  json.RawMessage `json:"input"` // a string, or a list of items
	Tools  []struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"tools"`
}

// inputItem is the part of an input item the fake reads.
type inputItem struct {
	Type   string          `json:"type"`
	Role   string          `json:"role"`
	CallID string          `json:"call_id"`
	Output json.RawMessage `json:"output"`
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, maxBody))
	req := Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	status, msg, param := s.check(r, body, &req)
	s.mu.Lock()
	req.Rejected = msg
	s.reqs = append(s.reqs, req)
	s.n++
	id := fmt.Sprintf("resp_fake%04d", s.n)
	s.mu.Unlock()
	if status != 0 {
		apiError(w, status, msg, param)
		return
	}
	reply := s.script(req)
	if reply.Status != 0 && reply.Status != http.StatusOK {
		apiError(w, reply.Status, reply.Message, "")
		return
	}
	if reply.Usage == (Usage{}) {
		reply.Usage = Usage{InputTokens: 100, OutputTokens: 10}
	}
	if req.Stream {
		stream(w, id, req.Model, reply)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(responseObject(id, req.Model, "completed", outputItems(id, reply, true), &reply.Usage))
}

// check validates a request as the API does and fills in req; a refusal is its status,
// message and parameter.
func (s *Server) check(r *http.Request, body []byte, req *Request) (int, string, string) {
	switch {
	case r.URL.Path != Path:
		return http.StatusNotFound, "Invalid URL (" + r.Method + " " + r.URL.Path + ")", ""
	case r.Method != http.MethodPost:
		return http.StatusMethodNotAllowed, "Invalid method for URL (" + r.Method + " " + r.URL.Path + ")", ""
	}
	if s.key != "" {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		switch {
		case !ok || got == "":
			return http.StatusUnauthorized, "You didn't provide an API key.", ""
		case got != s.key:
			return http.StatusUnauthorized, "Incorrect API key provided.", ""
		}
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(strings.ToLower(ct), "application/json") {
		return http.StatusBadRequest, "Invalid Content-Type header (" + ct + "), expected application/json.", ""
	}
	var wr wireRequest
	if err := json.Unmarshal(body, &wr); err != nil {
		return http.StatusBadRequest, "We could not parse the JSON body of your request.", ""
	}
	if wr.Model == "" {
		return http.StatusBadRequest, "Missing required parameter: 'model'.", "model"
	}
	req.Model, req.Stream = wr.Model, wr.Stream
	for _, t := range wr.Tools {
		req.Tools = append(req.Tools, t.Name)
	}
	var items []json.RawMessage
	var text string
	if len(wr.Input) > 0 && json.Unmarshal(wr.Input, &text) != nil && json.Unmarshal(wr.Input, &items) != nil {
		return http.StatusBadRequest, "Invalid type for 'input': expected a string or an array of input items.", "input"
	}
	calls := map[string]bool{}
	req.Outputs = map[string]string{}
	for i, raw := range items {
		var it inputItem
		if err := json.Unmarshal(raw, &it); err != nil {
			return http.StatusBadRequest, fmt.Sprintf("Invalid value for 'input[%d]'.", i), fmt.Sprintf("input[%d]", i)
		}
		switch {
		case it.Type == "function_call" || it.Type == "custom_tool_call":
			calls[it.CallID] = true
			req.Turn++
		case it.Type == "message" && it.Role == "assistant", it.Type == "" && it.Role == "assistant":
			req.Turn++
		case it.Type == "function_call_output" || it.Type == "custom_tool_call_output":
			if !calls[it.CallID] {
				return http.StatusBadRequest, "No tool call found for function call output with call_id " + it.CallID + ".", "input"
			}
			var text string
			if json.Unmarshal(it.Output, &text) != nil {
				text = string(it.Output)
			}
			req.Outputs[it.CallID] = text
		}
	}
	return 0, "", ""
}

func apiError(w http.ResponseWriter, status int, msg, param string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	typ := "invalid_request_error"
	var p any
	if param != "" {
		p = param
	}
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": p, "code": nil}})
}

// outputItems are the reply's output items, complete (done) or as first announced.
func outputItems(id string, reply Reply, done bool) []map[string]any {
	status := "completed"
	if !done {
		status = "in_progress"
	}
	var out []map[string]any
	for i, c := range reply.Calls {
		args := c.Arguments
		if !done {
			args = ""
		}
		if c.Custom {
			// The API's custom tool call item has no status.
			out = append(out, map[string]any{"type": "custom_tool_call", "id": fmt.Sprintf("ctc_%s_%d", id, i),
				"call_id": fmt.Sprintf("call_%s_%d", id, i), "name": c.Name, "input": args})
			continue
		}
		out = append(out, map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_%s_%d", id, i),
			"call_id": fmt.Sprintf("call_%s_%d", id, i), "name": c.Name, "arguments": args, "status": status})
	}
	if reply.Text != "" || len(reply.Calls) == 0 {
		content := []any{}
		if done {
			content = append(content, textPart(reply.Text))
		}
		out = append(out, map[string]any{"type": "message", "id": "msg_" + id, "role": "assistant",
			"status": status, "content": content})
	}
	return out
}

func textPart(text string) map[string]any {
	return map[string]any{"type": "output_text", "text": text, "annotations": []any{}}
}

func responseObject(id, model, status string, output []map[string]any, u *Usage) map[string]any {
	if output == nil {
		output = []map[string]any{}
	}
	o := map[string]any{"id": id, "object": "response", "created_at": 1763880000, "status": status,
		"model": model, "output": output, "usage": nil, "parallel_tool_calls": true, "store": false}
	if u != nil {
		o["usage"] = map[string]any{
			"input_tokens":          u.InputTokens,
			"input_tokens_details":  map[string]any{"cached_tokens": u.CachedTokens},
			"output_tokens":         u.OutputTokens,
			"output_tokens_details": map[string]any{"reasoning_tokens": u.ReasoningTokens},
			"total_tokens":          u.InputTokens + u.OutputTokens,
		}
	}
	return o
}

// stream writes reply as the API's server-sent events.
func stream(w http.ResponseWriter, id, model string, reply Reply) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	fl, _ := w.(http.Flusher)
	seq := 0
	ev := func(typ string, data map[string]any) {
		data["type"], data["sequence_number"] = typ, seq
		seq++
		line := string(marshal(data))
		if reply.Rewrite != nil {
			if line = reply.Rewrite(line); line == "" {
				return
			}
		}
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, line)
		if fl != nil {
			fl.Flush()
		}
	}
	ev("response.created", map[string]any{"response": responseObject(id, model, "in_progress", nil, nil)})
	ev("response.in_progress", map[string]any{"response": responseObject(id, model, "in_progress", nil, nil)})
	started, done := outputItems(id, reply, false), outputItems(id, reply, true)
	for i := range done {
		itemID := done[i]["id"]
		ev("response.output_item.added", map[string]any{"output_index": i, "item": started[i]})
		if done[i]["type"] == "function_call" {
			args := done[i]["arguments"].(string)
			for _, part := range split(args) {
				ev("response.function_call_arguments.delta", map[string]any{"item_id": itemID, "output_index": i, "delta": part})
			}
			ev("response.function_call_arguments.done", map[string]any{"item_id": itemID, "output_index": i, "arguments": args})
		} else if done[i]["type"] == "custom_tool_call" {
			input := done[i]["input"].(string)
			for _, part := range split(input) {
				ev("response.custom_tool_call_input.delta", map[string]any{"item_id": itemID, "output_index": i, "delta": part})
			}
			ev("response.custom_tool_call_input.done", map[string]any{"item_id": itemID, "output_index": i, "input": input})
		} else {
			ev("response.content_part.added", map[string]any{"item_id": itemID, "output_index": i, "content_index": 0, "part": textPart("")})
			for _, part := range split(reply.Text) {
				ev("response.output_text.delta", map[string]any{"item_id": itemID, "output_index": i, "content_index": 0, "delta": part, "logprobs": []any{}})
			}
			ev("response.output_text.done", map[string]any{"item_id": itemID, "output_index": i, "content_index": 0, "text": reply.Text, "logprobs": []any{}})
			ev("response.content_part.done", map[string]any{"item_id": itemID, "output_index": i, "content_index": 0, "part": textPart(reply.Text)})
		}
		ev("response.output_item.done", map[string]any{"output_index": i, "item": done[i]})
	}
	ev("response.completed", map[string]any{"response": responseObject(id, model, "completed", done, &reply.Usage)})
}

// marshal encodes v as the API does: on one line, without escaping <, > and &.
func marshal(v any) []byte {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
	return []byte(strings.TrimSuffix(b.String(), "\n"))
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
