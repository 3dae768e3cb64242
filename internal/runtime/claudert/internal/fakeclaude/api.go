package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// runAPI is claude's loop against the Messages API: it sends the prompt and the loaded tools
// to POST $ANTHROPIC_BASE_URL/v1/messages, authenticated the way claude is when
// ANTHROPIC_AUTH_TOKEN is set (a bearer token; with ANTHROPIC_API_KEY it would be x-api-key),
// prints each reply as an assistant event, makes every tool call the reply asks for (see
// claude.use), prints each result as a user event, and sends the results back, until a reply
// asks for no tool or --max-turns is reached.
func runAPI(c *claude, prompt string) {
	maxTurns, _ := strconv.Atoi(c.o.one("--max-turns"))
	if maxTurns <= 0 {
		maxTurns = 50
	}
	messages := []obj{{"role": "user", "content": prompt}}
	for turn := 1; ; turn++ {
		reply, err := callAPI(c, messages)
		if err != nil {
			fmt.Fprintln(os.Stderr, "API Error:", err)
			emit(result("error_during_execution", turn, nil, c.denialList()))
			os.Exit(1)
		}
		emit(assistant(reply.ID, reply.Content...))
		var results []obj
		var final strings.Builder
		for _, b := range reply.Content {
			switch b["type"] {
			case "text":
				final.WriteString(fmt.Sprint(b["text"]))
			case "tool_use":
				id, name := fmt.Sprint(b["id"]), fmt.Sprint(b["name"])
				input, _ := b["input"].(map[string]any)
				content, isErr := c.use(id, name, input)
				emit(toolResult(id, content, isErr))
				results = append(results, obj{"type": "tool_result", "tool_use_id": id, "content": content, "is_error": isErr})
			}
		}
		if len(results) == 0 {
			answer := final.String()
			emit(result("success", turn, &answer, c.denialList()))
			return
		}
		if turn >= maxTurns {
			emit(result("error_max_turns", turn, nil, c.denialList()))
			os.Exit(1)
		}
		messages = append(messages, obj{"role": "assistant", "content": reply.Content}, obj{"role": "user", "content": results})
	}
}

// apiReply is the part of a Messages API reply the loop uses.
type apiReply struct {
	ID      string `json:"id"`
	Content []obj  `json:"content"`
}

// callAPI makes one Messages API request with the conversation so far and the loaded tools.
func callAPI(c *claude, messages []obj) (apiReply, error) {
	base := os.Getenv("ANTHROPIC_BASE_URL")
	if base == "" {
		return apiReply{}, fmt.Errorf("ANTHROPIC_BASE_URL is not set")
	}
	model := c.o.one("--model")
	if model == "" {
		model = "claude-sonnet-4-5-20250929"
	}
	tools := []obj{}
	for _, t := range c.loaded {
		tools = append(tools, obj{"name": t, "description": "the " + t + " tool", "input_schema": obj{"type": "object"}})
	}
	body, _ := json.Marshal(obj{"model": model, "max_tokens": 1024, "stream": false, "messages": messages, "tools": tools})
	req, err := http.NewRequest(http.MethodPost, strings.TrimSuffix(base, "/")+"/v1/messages?beta=true", bytes.NewReader(body))
	if err != nil {
		return apiReply{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	req.Header.Set("Anthropic-Beta", "fine-grained-tool-streaming-2025-05-14")
	if tok := os.Getenv("ANTHROPIC_AUTH_TOKEN"); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if key := os.Getenv("ANTHROPIC_API_KEY"); key != "" {
		req.Header.Set("X-Api-Key", key)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return apiReply{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return apiReply{}, fmt.Errorf("%d %s", resp.StatusCode, b)
	}
	var r apiReply
	if err := json.Unmarshal(b, &r); err != nil {
		return apiReply{}, fmt.Errorf("decode the reply: %v", err)
	}
	return r, nil
}
