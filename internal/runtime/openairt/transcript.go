package openairt

import (
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// The transcript is JSON Lines: one [event] per line, each written with one Write so a
// line-oriented redacting writer sees whole lines. Event types:
//
//	system, user    the opening messages (content)
//	request         a request summary (turn, model, messages, tools, stream)
//	retry           a 429/5xx reply that will be retried (status, wait_ms)
//	assistant       the model's reply (content, tool_calls, finish_reason, usage)
//	tool_call       one call about to run (id, name, arguments)
//	tool_result     its result (id, name, content, is_error)
//	final           the loop finished (content)
//	needs_input     a tool asked a person (name, question)
//	stopped         a budget ended the loop (reason)
//	error           the loop ended with an error (error)

// event is one transcript line. Field names are part of the record format: add, never rename.
type event struct {
	Time         string          `json:"time"`
	Type         string          `json:"type"`
	Turn         int             `json:"turn,omitempty"`
	Model        string          `json:"model,omitempty"`
	Messages     int             `json:"messages,omitempty"`
	Tools        int             `json:"tools,omitempty"`
	Stream       bool            `json:"stream,omitempty"`
	Status       int             `json:"status,omitempty"`
	WaitMS       int64           `json:"wait_ms,omitempty"`
	Content      *string         `json:"content,omitempty"`
	ToolCalls    []eventToolCall `json:"tool_calls,omitempty"`
	FinishReason string          `json:"finish_reason,omitempty"`
	Usage        *usage          `json:"usage,omitempty"`
	ID           string          `json:"id,omitempty"`
	Name         string          `json:"name,omitempty"`
	Arguments    *string         `json:"arguments,omitempty"`
	IsError      bool            `json:"is_error,omitempty"`
	Question     string          `json:"question,omitempty"`
	Reason       string          `json:"reason,omitempty"`
	Error        string          `json:"error,omitempty"`
}

type eventToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// transcript writes events to w (nil: nowhere) and keeps the first write error.
type transcript struct {
	w   io.Writer
	err error
	now func() time.Time
}

func (t *transcript) write(e event) {
	if t.w == nil || t.err != nil {
		return
	}
	e.Time = t.now().UTC().Format(time.RFC3339Nano)
	b, err := json.Marshal(e)
	if err != nil {
		t.err = fmt.Errorf("encode transcript event %q: %w", e.Type, err)
		return
	}
	if _, err := t.w.Write(append(b, '\n')); err != nil {
		t.err = fmt.Errorf("write transcript: %w", err)
	}
}

func ptr[T any](v T) *T { return &v }
