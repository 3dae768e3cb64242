package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// callAPI makes the request claude makes for one turn: POST $ANTHROPIC_BASE_URL/v1/messages
// with the prompt, authenticated the way claude is when ANTHROPIC_AUTH_TOKEN is set (a bearer
// token; with ANTHROPIC_API_KEY it would be x-api-key), and returns the text of the reply.
func callAPI(o opts, prompt string) (string, error) {
	base := os.Getenv("ANTHROPIC_BASE_URL")
	if base == "" {
		return "", fmt.Errorf("ANTHROPIC_BASE_URL is not set")
	}
	model := o.one("--model")
	if model == "" {
		model = "claude-sonnet-4-5-20250929"
	}
	body, _ := json.Marshal(map[string]any{
		"model": model, "max_tokens": 1024, "stream": false,
		"messages": []map[string]any{{"role": "user", "content": prompt}},
	})
	req, err := http.NewRequest(http.MethodPost, strings.TrimSuffix(base, "/")+"/v1/messages?beta=true", bytes.NewReader(body))
	if err != nil {
		return "", err
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
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%d %s", resp.StatusCode, b)
	}
	var msg struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(b, &msg); err != nil {
		return "", fmt.Errorf("decode the reply: %v", err)
	}
	var out strings.Builder
	for _, c := range msg.Content {
		if c.Type == "text" {
			out.WriteString(c.Text)
		}
	}
	return out.String(), nil
}
