package openairt

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// loop is the state of one Run.
type loop struct {
	cfg     Config
	tools   Tools
	defs    []toolDef
	offered map[string]bool
	client  *client
	tr      *transcript
	res     Result
}

// run drives the conversation. ctx is the caller's; wctx adds the wall-time budget, so a
// wctx that is done while ctx is not means the budget is spent.
func (l *loop) run(ctx, wctx context.Context, userPrompt string) error {
	maxTurns := cmp.Or(l.cfg.MaxTurns, DefaultMaxTurns)
	var msgs []message
	if l.cfg.SystemPrompt != "" {
		msgs = append(msgs, message{Role: "system", Content: ptr(l.cfg.SystemPrompt)})
		l.tr.write(event{Type: "system", Content: ptr(l.cfg.SystemPrompt)})
	}
	msgs = append(msgs, message{Role: "user", Content: ptr(userPrompt)})
	l.tr.write(event{Type: "user", Content: ptr(userPrompt)})

	wallSpent := func() bool { return ctx.Err() == nil && wctx.Err() != nil }
	for {
		if l.tr.err != nil {
			return l.tr.err
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("run openai loop: %w", err)
		}
		switch {
		case wallSpent():
			return l.stop(StoppedWallTime)
		case l.res.Turns >= maxTurns:
			return l.stop(StoppedMaxTurns)
		case l.cfg.MaxTokens > 0 && addSat(l.res.PromptTokens, l.res.CompletionTokens) >= l.cfg.MaxTokens:
			return l.stop(StoppedMaxTokens)
		}
		turn := l.res.Turns + 1
		req := &chatRequest{Model: l.cfg.Model, Messages: msgs}
		if len(l.defs) > 0 {
			req.Tools, req.ToolChoice = l.defs, "auto"
		}
		if l.cfg.Stream {
			req.Stream, req.StreamOptions = true, &streamOptions{IncludeUsage: true}
		}
		l.tr.write(event{Type: "request", Turn: turn, Model: l.cfg.Model, Messages: len(msgs), Tools: len(l.defs), Stream: l.cfg.Stream})
		comp, err := l.client.complete(wctx, req)
		if err != nil {
			if wallSpent() {
				return l.stop(StoppedWallTime)
			}
			return fmt.Errorf("chat completion turn %d: %w", turn, err)
		}
		l.res.Turns = turn
		for i := range comp.ToolCalls {
			if comp.ToolCalls[i].ID == "" {
				comp.ToolCalls[i].ID = "call_" + strconv.Itoa(turn) + "_" + strconv.Itoa(i)
			}
			comp.ToolCalls[i].Type = "function"
		}
		if u := comp.Usage; u != nil {
			l.res.PromptTokens = addSat(l.res.PromptTokens, u.PromptTokens)
			l.res.CompletionTokens = addSat(l.res.CompletionTokens, u.CompletionTokens)
		}
		l.tr.write(assistantEvent(turn, comp))
		if len(comp.ToolCalls) == 0 {
			// finish_reason "stop", "length" or "content_filter": the answer is what it is.
			l.res.Final = comp.Content
			l.tr.write(event{Type: "final", Turn: turn, Content: ptr(comp.Content), FinishReason: comp.FinishReason})
			return nil
		}
		// Tool calls run even under finish_reason "stop": some servers report that with calls.
		asst := message{Role: "assistant", ToolCalls: comp.ToolCalls}
		if comp.Content != "" {
			asst.Content = ptr(comp.Content)
		}
		msgs = append(msgs, asst)
		for _, tc := range comp.ToolCalls {
			content, question, asked := l.call(wctx, turn, tc)
			if asked {
				l.res.NeedsInput = question
				l.tr.write(event{Type: "needs_input", Turn: turn, ID: tc.ID, Name: tc.Function.Name, Question: question})
				return nil
			}
			if wallSpent() {
				return l.stop(StoppedWallTime)
			}
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("run openai loop: %w", err)
			}
			msgs = append(msgs, message{Role: "tool", ToolCallID: tc.ID, Content: ptr(content)})
		}
	}
}

// call runs one tool call and returns the text for the model, or the question when the tool
// asks a person for input.
func (l *loop) call(ctx context.Context, turn int, tc toolCall) (content, question string, asked bool) {
	name, raw := tc.Function.Name, tc.Function.Arguments
	l.tr.write(event{Type: "tool_call", Turn: turn, ID: tc.ID, Name: name, Arguments: ptr(raw)})
	result := func(content string, isErr bool) (string, string, bool) {
		content = truncate(content, maxToolResultBytes)
		l.tr.write(event{Type: "tool_result", Turn: turn, ID: tc.ID, Name: name, Content: ptr(content), IsError: isErr})
		return content, "", false
	}
	args := json.RawMessage(raw)
	if len(jsonTrim(raw)) == 0 {
		args = json.RawMessage(`{}`) // some servers send "" for a call without arguments
	}
	if !l.offered[name] {
		// Not offered: Call still sees it, so the refusal is audited. Arguments that are not
		// JSON are handed over as a JSON string, so the record keeps what the model sent.
		if !json.Valid(args) {
			b, _ := json.Marshal(raw)
			args = b
		}
	} else if !objectArgs(args) {
		return result("error: arguments are not a JSON object; send the arguments as one JSON object matching the tool's parameters", true)
	}
	if l.tools == nil {
		return result("error: no tools are available", true)
	}
	out, err := l.tools.Call(context.WithValue(ctx, callIDKey{}, tc.ID), name, args)
	if err != nil {
		var ni needsInput
		if errors.As(err, &ni) {
			q := cmp.Or(ni.NeedsInput(), "(the agent asked for input without a question)")
			return "", q, true
		}
		return result("error: "+err.Error(), true)
	}
	return result(out, false)
}

// callIDKey carries the model's id of a tool call into [Tools.Call]'s context.
type callIDKey struct{}

// CallID returns the model's id of the tool call a [Tools.Call] context belongs to, or "":
// a call held for approval is named by it.
func CallID(ctx context.Context) string {
	id, _ := ctx.Value(callIDKey{}).(string)
	return id
}

func (l *loop) stop(reason string) error {
	l.res.Stopped = reason
	l.tr.write(event{Type: "stopped", Turn: l.res.Turns, Reason: reason})
	return nil
}

func assistantEvent(turn int, c completion) event {
	e := event{Type: "assistant", Turn: turn, Content: ptr(c.Content), FinishReason: c.FinishReason, Usage: c.Usage}
	for _, tc := range c.ToolCalls {
		e.ToolCalls = append(e.ToolCalls, eventToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	return e
}

// truncate cuts s to at most n bytes on a rune boundary, saying how much was cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n[truncated: %d more bytes]", len(s)-cut)
}

func jsonTrim(s string) string {
	i, j := 0, len(s)
	for i < j && isSpace(s[i]) {
		i++
	}
	for j > i && isSpace(s[j-1]) {
		j--
	}
	return s[i:j]
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// addSat adds token counts without overflowing.
func addSat(a, b int64) int64 {
	if a > 0 && b > 1<<63-1-a {
		return 1<<63 - 1
	}
	return a + b
}
