package claudert

// The stream-json format, as `claude --print --output-format stream-json --verbose` writes
// it: one JSON object per line, each with a "type".
//
//   - {"type":"system","subtype":"init","session_id","cwd","model","permissionMode","tools":[...],
//     "mcp_servers":[{"name","status"}],...} opens the run; other system subtypes may follow.
//   - {"type":"assistant","message":{"id","type":"message","role":"assistant","model",
//     "content":[{"type":"text","text"} | {"type":"tool_use","id","name","input"} |
//     {"type":"thinking",...}],"usage":{...}},"parent_tool_use_id","session_id"}
//   - {"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id",
//     "content","is_error"}]},"parent_tool_use_id","session_id"} carries tool results back.
//   - {"type":"result","subtype":"success"|"error_max_turns"|"error_during_execution"|
//     "error_max_budget_usd"|...,"is_error","duration_ms","duration_api_ms","num_turns",
//     "result" (success only),"session_id","total_cost_usd","usage":{"input_tokens",
//     "cache_creation_input_tokens","cache_read_input_tokens","output_tokens",...},
//     "permission_denials":[{"tool_name","tool_use_id","tool_input"}],"errors":[...]} ends it.
//
// Sources:
//   - https://code.claude.com/docs/en/headless (print mode, --output-format stream-json)
//   - https://code.claude.com/docs/en/cli-reference (stream-json requires --verbose)
//   - https://platform.claude.com/docs/en/agent-sdk/typescript (SDKSystemMessage,
//     SDKAssistantMessage, SDKUserMessage, SDKResultMessage, SDKPermissionDenial: the same
//     objects the CLI prints, one per line)
//   - https://takopi.banteg.xyz/reference/runners/claude/stream-json-cheatsheet (line
//     examples, from humanlayer/claudecode-go)

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/agora-dev/agora/internal/strictjson"
)

const (
	// MaxEventBytes caps one line of claude's output. A longer line is skipped whole (a
	// huge tool result, say); if it was the result event, the run has no result.
	MaxEventBytes = 16 << 20
	// maxToolUses caps the tool uses a Result lists; the rest are counted.
	maxToolUses = 100_000
	// maxErrors and maxErrorBytes cap the result's error messages kept in a Result.
	maxErrors     = 16
	maxErrorBytes = 1024
)

// ErrNoResult means claude's output ended without a result event.
var ErrNoResult = errors.New("claude output has no result event")

// Result is what one run of claude produced.
type Result struct {
	// Final is the final answer: the result event's "result", or when it has none (error
	// results) the last top-level assistant text.
	Final string
	// IsError and Subtype are the result event's "is_error" and "subtype" ("success",
	// "error_max_turns", "error_during_execution", ...).
	IsError bool
	Subtype string
	// Turns is "num_turns"; CostUSD is "total_cost_usd" as claude computed it.
	Turns   int
	CostUSD float64
	// InputTokens counts every input token of the run, cached or not (input_tokens +
	// cache_creation_input_tokens + cache_read_input_tokens); OutputTokens is output_tokens.
	InputTokens, OutputTokens int64
	// ToolUses lists the tool calls the model made, in order, subagents' included.
	ToolUses []ToolUse
	// ToolUsesOmitted counts the tool uses past the first 100 000, not listed.
	ToolUsesOmitted int
	// Denials lists the calls Claude Code's permission checks refused ("permission_denials").
	Denials []ToolUse
	// Errors are the result event's "errors" messages (error results), at most 16, each cut
	// at 1 KiB. They are claude's words: the caller redacts them like any output.
	Errors []string
	// SessionID is claude's session id.
	SessionID string
	// Tools is the tool list of the last well-formed init event, nil when there was none.
	Tools []string
	// Skipped counts the non-empty output lines that were not a well-formed event (not
	// JSON, not one object with a "type", ambiguous keys, over MaxEventBytes). They are not
	// in the transcript.
	Skipped int
}

// ToolUse is one tool call: its id, the tool's name and the SHA-256 (hex) of its input as
// compact JSON. The input itself is only in the transcript.
type ToolUse struct {
	ID, Name    string
	InputSHA256 string
}

// ParseStream reads claude's stream-json output from r to its end, writes every well-formed
// event line to transcript (nil discards), shows the events obs observes to it (nil shows
// none) and returns what the run produced. It reads r to its end (or a read error) whatever
// it finds, so a writer on the other side of a pipe never blocks. It returns [ErrNoResult]
// when no result event came, an error naming the problem when the result event is
// malformed (the last result event counts), and the first transcript write error.
func ParseStream(r io.Reader, transcript io.Writer, obs Observer) (Result, error) {
	p := parser{transcript: transcript, obs: obs}
	br := bufio.NewReaderSize(r, 64<<10)
	var buf []byte
	for {
		line, tooLong, rerr := readLine(br, buf[:0])
		buf = line
		switch {
		case tooLong:
			p.res.Skipped++
		case len(bytes.TrimSpace(line)) > 0:
			p.line(line)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return p.res, fmt.Errorf("read claude output: %w", rerr)
		}
	}
	return p.finish()
}

// readLine reads one line into buf (without its end of line), or reports it too long after
// discarding the rest of it.
func readLine(br *bufio.Reader, buf []byte) ([]byte, bool, error) {
	tooLong := false
	for {
		frag, err := br.ReadSlice('\n')
		if !tooLong && len(buf)+len(frag) > MaxEventBytes+2 {
			tooLong, buf = true, buf[:0]
		}
		if !tooLong {
			buf = append(buf, frag...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		buf = bytes.TrimSuffix(buf, []byte("\n"))
		buf = bytes.TrimSuffix(buf, []byte("\r"))
		if !tooLong && len(buf) > MaxEventBytes {
			tooLong, buf = true, buf[:0]
		}
		return buf, tooLong, err
	}
}

type parser struct {
	transcript io.Writer
	obs        Observer
	werr       error
	res        Result
	lastText   string
	result     object // the last result event
}

func (p *parser) line(b []byte) {
	if strictjson.CheckObject(b) != nil {
		p.res.Skipped++
		return
	}
	top, err := decodeObject(b)
	var typ string
	if err == nil {
		_, err = top.field("type", &typ)
	}
	if err != nil || typ == "" {
		p.res.Skipped++
		return
	}
	if p.transcript != nil && p.werr == nil {
		if _, err := p.transcript.Write(append(b, '\n')); err != nil {
			p.werr = fmt.Errorf("write transcript: %w", err)
		}
	}
	var session string
	if ok, err := top.field("session_id", &session); ok && err == nil && session != "" {
		p.res.SessionID = session
	}
	switch typ {
	case "system":
		p.system(top)
	case "assistant":
		p.assistant(top)
	case "user":
		p.user(top)
	case "result":
		p.result = top
	}
}

// system reads an init event: the tools claude loaded and its permission mode.
func (p *parser) system(top object) {
	var subtype, mode string
	var tools []string
	if ok, err := top.field("subtype", &subtype); !ok || err != nil || subtype != "init" {
		return
	}
	if ok, err := top.field("tools", &tools); !ok || err != nil {
		return
	}
	if _, err := top.field("permissionMode", &mode); err != nil {
		return
	}
	if tools == nil {
		tools = []string{}
	}
	p.res.Tools = tools
	if p.obs != nil {
		p.obs.Init(Init{Tools: slices.Clone(tools), PermissionMode: mode})
	}
}

// assistant records tool uses and the last top-level text of one assistant message. A
// message of a shape this parser does not know stays in the transcript only.
func (p *parser) assistant(top object) {
	var parent string
	if _, err := top.field("parent_tool_use_id", &parent); err != nil {
		return
	}
	var msg object
	var content []json.RawMessage
	if _, err := top.field("message", &msg); err != nil {
		return
	}
	if _, err := msg.field("content", &content); err != nil {
		return
	}
	for _, raw := range content {
		block, err := decodeObject(raw)
		if err != nil {
			continue
		}
		var typ, text, id, name string
		var input json.RawMessage
		if _, err := block.field("type", &typ); err != nil {
			continue
		}
		switch typ {
		case "text":
			if _, err := block.field("text", &text); err == nil && parent == "" {
				p.lastText = text
			}
		case "tool_use", "server_tool_use":
			if len(p.res.ToolUses) >= maxToolUses {
				p.res.ToolUsesOmitted++
				continue
			}
			_, err1 := block.field("id", &id)
			_, err2 := block.field("name", &name)
			_, err3 := block.field("input", &input)
			if err1 != nil || err2 != nil || err3 != nil {
				continue
			}
			p.res.ToolUses = append(p.res.ToolUses, ToolUse{ID: id, Name: name, InputSHA256: inputHash(input)})
			if p.obs != nil {
				p.obs.ToolCall(ToolCall{ID: id, Name: name, Input: input, Parent: parent})
			}
		}
	}
}

// user reads the tool results of one user message, for the observer.
func (p *parser) user(top object) {
	if p.obs == nil {
		return
	}
	var msg object
	var content []json.RawMessage
	if _, err := top.field("message", &msg); err != nil {
		return
	}
	if _, err := msg.field("content", &content); err != nil {
		return // a plain-text user message holds no tool result
	}
	for _, raw := range content {
		block, err := decodeObject(raw)
		if err != nil {
			continue
		}
		var typ, id string
		var isError bool
		if _, err := block.field("type", &typ); err != nil || typ != "tool_result" {
			continue
		}
		if ok, err := block.field("tool_use_id", &id); !ok || err != nil || id == "" {
			continue
		}
		if _, err := block.field("is_error", &isError); err != nil {
			continue
		}
		r := ToolResult{ID: id, IsError: isError}
		if text := strings.TrimSpace(resultText(block["content"])); isError {
			classifyRefusal(&r, text)
		}
		p.obs.ToolResult(r)
	}
}

// classifyRefusal sets r's refusal kind from the text of an error result. Only claude's
// own refusals match: each starts the text, and a tool's output never does, since claude
// prints a failed tool's output after its own prefix ("Exit code N", "Error: ...").
func classifyRefusal(r *ToolResult, text string) {
	switch {
	case strings.HasPrefix(text, toolUseError):
		r.UseError = true
		r.NoSuchTool = strings.Contains(text, noSuchTool)
	case strings.HasPrefix(text, permissionPrefix):
		rest := text[len(permissionPrefix):]
		name, _, _ := strings.Cut(rest, " ")
		if name != "" && strings.Contains(rest, permissionDenied) {
			r.PermissionDenied, r.Tool = true, name
		}
	case strings.HasPrefix(text, hookPrefix):
		name, _, ok := strings.Cut(text[len(hookPrefix):], hookError)
		if ok && name != "" && !strings.ContainsAny(name, " \n") {
			r.HookBlocked, r.Tool = true, name
		}
	}
}

// resultText is the text of a tool_result's content: a string, or the text blocks of an
// array.
func resultText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []json.RawMessage
	if json.Unmarshal(raw, &blocks) != nil {
		return ""
	}
	var b strings.Builder
	for _, raw := range blocks {
		block, err := decodeObject(raw)
		if err != nil {
			continue
		}
		var typ, text string
		if _, err := block.field("type", &typ); err == nil && typ == "text" {
			if _, err := block.field("text", &text); err == nil {
				b.WriteString(text)
			}
		}
	}
	return b.String()
}

// finish decodes the last result event.
func (p *parser) finish() (Result, error) {
	res := p.res
	res.Final = p.lastText
	if p.result == nil {
		return res, errors.Join(ErrNoResult, p.werr)
	}
	ev, err := decodeResult(p.result)
	if err != nil {
		return res, errors.Join(fmt.Errorf("parse claude result event: %w", err), p.werr)
	}
	res.Subtype, res.IsError, res.Turns, res.CostUSD = ev.subtype, ev.isError, ev.turns, ev.cost
	if ev.hasResult {
		res.Final = ev.result
	}
	res.InputTokens, res.OutputTokens = ev.input, ev.output
	res.Denials = ev.denials
	res.Errors = ev.errors
	return res, p.werr
}

// resultEvent is a decoded result event.
type resultEvent struct {
	subtype       string
	isError       bool
	result        string
	hasResult     bool
	turns         int
	cost          float64
	input, output int64
	denials       []ToolUse
	errors        []string
}

// decodeResult reads the fields of a result event by their exact names.
func decodeResult(top object) (resultEvent, error) {
	var ev resultEvent
	if ok, err := top.field("subtype", &ev.subtype); err != nil || !ok || ev.subtype == "" {
		return ev, errors.Join(errors.New("no subtype"), err)
	}
	if ok, err := top.field("is_error", &ev.isError); err != nil || !ok {
		return ev, errors.Join(errors.New("no is_error"), err)
	}
	var err error
	ev.hasResult, err = top.field("result", &ev.result)
	if err != nil {
		return ev, err
	}
	if _, err := top.field("num_turns", &ev.turns); err != nil {
		return ev, err
	}
	if _, err := top.field("total_cost_usd", &ev.cost); err != nil {
		return ev, err
	}
	var usage object
	if _, err := top.field("usage", &usage); err != nil {
		return ev, err
	}
	var in, created, read int64
	for _, f := range []struct {
		key string
		dst *int64
	}{{"input_tokens", &in}, {"cache_creation_input_tokens", &created}, {"cache_read_input_tokens", &read}, {"output_tokens", &ev.output}} {
		if _, err := usage.field(f.key, f.dst); err != nil {
			return ev, err
		}
		if *f.dst < 0 {
			return ev, fmt.Errorf("negative count %s", f.key)
		}
	}
	if ev.turns < 0 {
		return ev, errors.New("negative count num_turns")
	}
	if ev.cost < 0 || math.IsInf(ev.cost, 0) {
		return ev, errors.New("bad total_cost_usd")
	}
	ev.input = satAdd(satAdd(in, created), read)
	var denials []object
	if _, err := top.field("permission_denials", &denials); err != nil {
		return ev, err
	}
	for _, d := range denials {
		var u ToolUse
		var input json.RawMessage
		_, err1 := d.field("tool_name", &u.Name)
		_, err2 := d.field("tool_use_id", &u.ID)
		_, err3 := d.field("tool_input", &input)
		if err := errors.Join(err1, err2, err3); err != nil {
			return ev, fmt.Errorf("permission_denials: %w", err)
		}
		u.InputSHA256 = inputHash(input)
		ev.denials = append(ev.denials, u)
	}
	var errs []json.RawMessage
	if _, err := top.field("errors", &errs); err != nil {
		return ev, err
	}
	for _, e := range errs {
		if len(ev.errors) == maxErrors {
			break
		}
		var s string
		if json.Unmarshal(e, &s) != nil {
			s = string(compactJSON(e))
		}
		ev.errors = append(ev.errors, cut(s, maxErrorBytes))
	}
	return ev, nil
}

// inputHash is the SHA-256 of a tool input as compact JSON; an absent input hashes as null.
func inputHash(in json.RawMessage) string {
	sum := sha256.Sum256(compactJSON(in))
	return hex.EncodeToString(sum[:])
}

func compactJSON(in json.RawMessage) []byte {
	var b bytes.Buffer
	if len(in) == 0 || json.Compact(&b, in) != nil {
		return []byte("null")
	}
	return b.Bytes()
}

// cut shortens s to at most n bytes on a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
