package openairt

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/agora-dev/agora/internal/strictjson"
)

// A streamed reply is a text/event-stream (https://html.spec.whatwg.org/multipage/server-sent-events.html)
// of `data: {chunk}` events ending with `data: [DONE]`. Each chunk carries a delta of
// choices[0]: content in pieces, and tool calls keyed by index whose id and name arrive once
// and whose arguments arrive in fragments. With stream_options.include_usage the last chunk
// before [DONE] has no choices and the usage of the whole reply.

// errStreamDone stops readSSE at `data: [DONE]`.
var errStreamDone = errors.New("stream done")

// readSSE calls fn with the data of each event read from r, in order. Lines end with LF, CRLF
// or CR; `data:` lines of one event are joined with LF; comments and other fields are
// ignored; an event still pending at end of input is delivered. A line longer than maxLine
// fails with [ErrResponseTooLarge]. It stops at the first error fn returns and returns it.
func readSSE(r io.Reader, maxLine int, fn func(data []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxLine)
	sc.Split(scanLines)
	var data []byte
	pending := false
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			if pending {
				if err := fn(data); err != nil {
					return err
				}
			}
			data, pending = data[:0], false
			continue
		}
		field, value, found := bytes.Cut(line, []byte(":"))
		if !found {
			value = nil // a field name alone has an empty value
		}
		value = bytes.TrimPrefix(value, []byte(" "))
		if string(field) != "data" {
			continue // comments (empty field name), event, id, retry
		}
		if pending {
			data = append(data, '\n')
		}
		data = append(data, value...)
		pending = true
		if len(data) > maxLine {
			return ErrResponseTooLarge
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return ErrResponseTooLarge
		}
		return err
	}
	if pending {
		return fn(data)
	}
	return nil
}

// scanLines is bufio.ScanLines that also accepts a lone CR as a line end, as SSE does.
func scanLines(data []byte, atEOF bool) (int, []byte, error) {
	if atEOF && len(data) == 0 {
		return 0, nil, nil
	}
	if i := bytes.IndexAny(data, "\r\n"); i >= 0 {
		if data[i] == '\n' {
			return i + 1, data[:i], nil
		}
		if i+1 < len(data) {
			if data[i+1] == '\n' {
				return i + 2, data[:i], nil
			}
			return i + 1, data[:i], nil
		}
		if atEOF {
			return i + 1, data[:i], nil
		}
		return 0, nil, nil // a CR at the end of the buffer: wait to see whether LF follows
	}
	if atEOF {
		return len(data), data, nil
	}
	return 0, nil, nil
}

// chunk is one chat.completion.chunk.
type chunk struct {
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content   *string         `json:"content"`
			ToolCalls []toolCallDelta `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *usage    `json:"usage"`
	Error *apiError `json:"error"`
}

type toolCallDelta struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// streamAcc assembles a completion from chunks.
type streamAcc struct {
	content strings.Builder
	calls   map[int]*callAcc
	last    int // index of the call a delta without an index continues
	finish  string
	usage   *usage
	chunks  int
}

func (a *streamAcc) add(data []byte) error {
	var c chunk
	if err := strictjson.UnmarshalKnown(data, &c); err != nil {
		return fmt.Errorf("%w: chunk %d: %s", ErrBadResponse, a.chunks, jsonProblem(err))
	}
	a.chunks++
	if c.Error != nil {
		return fmt.Errorf("%w: server error in stream: %s", ErrBadResponse, bounded(c.Error.Message))
	}
	if c.Usage != nil {
		a.usage = clean(c.Usage)
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue // the loop asks for one choice
		}
		if ch.Delta.Content != nil {
			a.content.WriteString(*ch.Delta.Content)
		}
		for _, d := range ch.Delta.ToolCalls {
			if err := a.addCall(d); err != nil {
				return err
			}
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			a.finish = *ch.FinishReason
		}
	}
	return nil
}

// callAcc assembles one streamed tool call; arguments go to a builder, since a server may
// send them a byte at a time.
type callAcc struct {
	id, name string
	args     strings.Builder
}

func (a *streamAcc) addCall(d toolCallDelta) error {
	if a.calls == nil {
		a.calls = map[int]*callAcc{}
	}
	idx := a.last
	switch {
	case d.Index != nil:
		idx = *d.Index
	case d.ID != "" && a.calls[idx] != nil && a.calls[idx].id != d.ID:
		idx = a.last + 1 // a server that leaves out the index starts a new call with a new id
	}
	if idx < 0 || idx >= maxToolCalls {
		return fmt.Errorf("%w: tool call index %d out of range [0, %d)", ErrBadResponse, idx, maxToolCalls)
	}
	tc := a.calls[idx]
	if tc == nil {
		tc = &callAcc{}
		a.calls[idx] = tc
	}
	a.last = idx
	if d.ID != "" {
		tc.id = d.ID
	}
	if d.Function.Name != "" {
		tc.name = d.Function.Name
	}
	tc.args.WriteString(d.Function.Arguments)
	return nil
}

func (a *streamAcc) result() (completion, error) {
	c := completion{Content: a.content.String(), FinishReason: a.finish, Usage: a.usage}
	idx := slices.Sorted(maps.Keys(a.calls))
	for _, i := range idx {
		tc := a.calls[i]
		if tc.name == "" {
			return completion{}, fmt.Errorf("%w: streamed tool call %d has no name", ErrBadResponse, i)
		}
		c.ToolCalls = append(c.ToolCalls, toolCall{ID: tc.id, Type: "function", Function: functionCall{Name: tc.name, Arguments: tc.args.String()}})
	}
	return c, nil
}

// decodeStream reads a streamed reply from r. A stream that ends without [DONE] is accepted
// only when a finish reason was seen; otherwise it was cut off.
func decodeStream(r io.Reader, maxLine int) (completion, error) {
	var a streamAcc
	err := readSSE(r, maxLine, func(data []byte) error {
		if string(bytes.TrimSpace(data)) == "[DONE]" {
			return errStreamDone
		}
		return a.add(data)
	})
	switch {
	case errors.Is(err, errStreamDone):
	case err != nil:
		return completion{}, err
	case a.finish == "":
		return completion{}, fmt.Errorf("%w: stream ended before [DONE] and without a finish reason", ErrBadResponse)
	}
	return a.result()
}
