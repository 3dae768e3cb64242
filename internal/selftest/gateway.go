package selftest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// The model gateway runs only for a model runtime's dispatch, so the gateway attacks run
// under an openai subagent (bundle/subagent-gw.yaml) whose model is the scripted one below,
// on the host's loopback at grantedAddr: it answers the first request of a conversation
// with a run_command call of bundle/run.sh, and a conversation that holds the call's result
// with a final answer. Everything it gets is kept, so an observation can tell whether the
// gateway forwarded what an attack sent.

// gwModel is the model the gw subagent names; the gateway forwards requests for it only.
const gwModel = "selftest-model"

// runArgv is the call the scripted model asks for: the attack's program, as the exec
// subagents run it.
var runArgv = []string{"sh", "-c", `exec sh "$AGORA_CAPABILITIES/selftest/run.sh"`}

// chatRequest is what the scripted model reads of a chat completions request.
type chatRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role    string `json:"role"`
		Content any    `json:"content"`
	} `json:"messages"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// serveModel answers the chat completions API at the wire level (docs at
// platform.openai.com/docs/api-reference/chat): the key as a bearer token, a JSON body, and
// a JSON completion or, for "stream": true, an event stream of chunks ending in [DONE].
func (fx *fixtures) serveModel(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	fx.keep(&fx.model, "the model behind the gateway", append([]byte(r.Method+" "+r.URL.Path+" Authorization: "+r.Header.Get("Authorization")+" "), body...))
	switch {
	case err != nil:
		apiError(w, http.StatusBadRequest, "could not read the request body")
		return
	case r.Header.Get("Authorization") != "Bearer "+fx.modelKey:
		apiError(w, http.StatusUnauthorized, "Incorrect API key provided.")
		return
	case r.Method == http.MethodGet && r.URL.Path == "/v1/models":
		writeJSONReply(w, map[string]any{"object": "list", "data": []any{map[string]any{"id": gwModel, "object": "model", "owned_by": "selftest"}}})
		return
	case r.URL.Path != "/v1/chat/completions" || r.Method != http.MethodPost:
		apiError(w, http.StatusNotFound, "Invalid URL ("+r.Method+" "+r.URL.Path+")")
		return
	}
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil || req.Model == "" || len(req.Messages) == 0 {
		apiError(w, http.StatusBadRequest, "the request needs a model and messages")
		return
	}
	answered := false
	var said []string
	for _, m := range req.Messages {
		answered = answered || m.Role == "tool"
		if c, ok := m.Content.(string); ok && m.Role == "user" {
			said = append(said, c)
		}
	}
	// A review attack's reviewer answers with the review its input asks for (review.go).
	final := "the selftest attack ran"
	if v := modelReview(reviewWanted(said)); v != "" {
		final = v
	}
	msg := map[string]any{"role": "assistant", "content": final}
	finish := "stop"
	if !answered {
		args, _ := json.Marshal(map[string]any{"argv": runArgv})
		msg = map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
			"id": "call_selftest", "type": "function",
			"function": map[string]any{"name": "run_command", "arguments": string(args)},
		}}}
		finish = "tool_calls"
	}
	usage := map[string]any{"prompt_tokens": 20, "completion_tokens": 10, "total_tokens": 30}
	head := map[string]any{"id": "chatcmpl-selftest", "created": time.Now().Unix(), "model": req.Model}
	if !req.Stream {
		head["object"] = "chat.completion"
		head["choices"] = []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}
		head["usage"] = usage
		writeJSONReply(w, head)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	head["object"] = "chat.completion.chunk"
	if calls, ok := msg["tool_calls"].([]any); ok {
		calls[0].(map[string]any)["index"] = 0
	}
	chunk := func(choices []any, extra map[string]any) {
		c := map[string]any{}
		for k, v := range head {
			c[k] = v
		}
		c["choices"] = choices
		for k, v := range extra {
			c[k] = v
		}
		b, _ := json.Marshal(c)
		fmt.Fprintf(w, "data: %s\n\n", b)
	}
	chunk([]any{map[string]any{"index": 0, "delta": msg, "finish_reason": nil}}, nil)
	chunk([]any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": finish}}, nil)
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		chunk([]any{}, map[string]any{"usage": usage})
	}
	io.WriteString(w, "data: [DONE]\n\n")
}

func writeJSONReply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// apiError answers in the API's error shape.
func apiError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "param": nil, "code": nil}})
}

// decideApproval: a made-up call the grant holds for no approval must never reach a person.
func decideApproval(h hostRecord, m, status, said string) (string, string) {
	for _, a := range h.Approvals {
		if strings.Contains(a.CallID, m) {
			return Allowed, fmt.Sprintf("a person was asked about the made-up call %s (%s %s)", a.CallID, a.Tool, a.State)
		}
	}
	if status == "" {
		return NotRun, "the program left no report"
	}
	return Blocked, fmt.Sprintf("the record holds no approval of the made-up call (%d approvals); the gateway: %s", len(h.Approvals), clip(said, 100))
}
