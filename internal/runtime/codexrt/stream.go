package codexrt

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/agora-dev/agora/internal/strictjson"
)

// maxLine bounds one JSONL event (a command's aggregated output rides in its item).
const maxLine = 8 << 20

// ErrNoTurn means codex's stream ended without turn.completed or turn.failed.
var ErrNoTurn = errors.New("codex output ended before the turn did (no turn.completed or turn.failed)")

// Item kinds codexrt reports to the [Observer]; others (reasoning, todo_list, ...) are kept
// in the transcript only.
const (
	KindCommand    = "command_execution"
	KindFileChange = "file_change"
	KindMessage    = "agent_message"
	KindMCPCall    = "mcp_tool_call"
	KindWebSearch  = "web_search"
)

// Item is one item of codex's turn, as item.started or item.completed carries it.
type Item struct {
	ID     string `json:"id"`
	Type   string `json:"type"`
	Status string `json:"status,omitempty"`
	// command_execution
	Command  string `json:"command,omitempty"`
	Output   string `json:"aggregated_output,omitempty"`
	ExitCode *int   `json:"exit_code,omitempty"`
	// file_change
	Changes []Change `json:"changes,omitempty"`
	// agent_message, error
	Text    string `json:"text,omitempty"`
	Message string `json:"message,omitempty"`
	// mcp_tool_call
	Server string `json:"server,omitempty"`
	Tool   string `json:"tool,omitempty"`
	// web_search
	Query string `json:"query,omitempty"`
}

// Change is one file of a file_change item.
type Change struct {
	Path string `json:"path"`
	Kind string `json:"kind"` // add, delete, update
}

// Usage is turn.completed's token count, summed over the turn.
type Usage struct {
	InputTokens           int64 `json:"input_tokens"`
	CachedInputTokens     int64 `json:"cached_input_tokens"`
	OutputTokens          int64 `json:"output_tokens"`
	ReasoningOutputTokens int64 `json:"reasoning_output_tokens"`
}

// Result is what one codex run produced.
type Result struct {
	ThreadID string
	// Final is the last agent_message's text.
	Final string
	// Completed is set by turn.completed, Failed by turn.failed (with Errors).
	Completed, Failed bool
	Usage             Usage
	// Errors are the messages of error events and turn.failed, in order.
	Errors []string
}

// Observer sees items as they are parsed: Started when codex begins one (a command before
// it runs), Completed when it is done. Calls come from the parsing goroutine, in order.
type Observer interface {
	Started(Item)
	Completed(Item)
}

type event struct {
	Type     string `json:"type"`
	ThreadID string `json:"thread_id"`
	Item     *Item  `json:"item"`
	Usage    *Usage `json:"usage"`
	Message  string `json:"message"`
	Error    *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// parseStream reads codex's --json output to its end, copying each line to transcript (when
// not nil) and showing items to obs (when not nil). A line that is not exactly one JSON
// event (see [Result.apply]) is an error naming its line number; nothing after it is shown
// to obs, and parseStream still reads to the end so codex is never blocked on a full pipe.
// onErr, when not nil, is told of the first unreadable line as soon as it is read (Run stops
// codex then: what it does next would go unseen). It returns [ErrNoTurn] when no turn ended.
func parseStream(r io.Reader, transcript io.Writer, obs Observer, onErr func(error)) (Result, error) {
	var res Result
	var perr error
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Bytes()
		if transcript != nil {
			transcript.Write(line)
			transcript.Write([]byte{'\n'})
		}
		if perr != nil || len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if err := res.apply(line, obs); err != nil {
			perr = fmt.Errorf("codex output line %d: %w", n, err)
			if onErr != nil {
				onErr(perr)
			}
		}
	}
	if err := sc.Err(); err != nil {
		if perr == nil {
			perr = fmt.Errorf("codex output line %d: %w", n+1, err)
			if onErr != nil {
				onErr(perr)
			}
		}
		_, _ = io.Copy(io.Discard, r)
	}
	if perr == nil && !res.Completed && !res.Failed {
		perr = ErrNoTurn
	}
	return res, perr
}

// apply folds one event into res. The event is read exactly (strictjson.UnmarshalKnown): a
// line with two keys equal under case folding, or a key that only folds to one agora reads
// ("Item", "Command"), would tell the audit one thing and a case-sensitive reader of the
// transcript another, and is refused.
func (res *Result) apply(line []byte, obs Observer) error {
	var ev event
	if err := strictjson.CheckObject(line); err != nil {
		return fmt.Errorf("not a JSON event: %w", err)
	}
	if err := strictjson.UnmarshalKnown(line, &ev); err != nil {
		return fmt.Errorf("not a JSON event agora can read exactly: %w", err)
	}
	switch ev.Type {
	case "":
		return errors.New(`event has no "type"`)
	case "thread.started":
		res.ThreadID = ev.ThreadID
	case "item.started", "item.updated", "item.completed":
		if ev.Item == nil || ev.Item.ID == "" || ev.Item.Type == "" {
			return fmt.Errorf("%s without an item id and type", ev.Type)
		}
		if ev.Type == "item.completed" && ev.Item.Type == KindMessage {
			res.Final = ev.Item.Text
		}
		if obs != nil && ev.Type == "item.started" {
			obs.Started(*ev.Item)
		} else if obs != nil && ev.Type == "item.completed" {
			obs.Completed(*ev.Item)
		}
	case "turn.completed":
		res.Completed = true
		if ev.Usage != nil {
			res.Usage = *ev.Usage
		}
	case "turn.failed":
		res.Failed = true
		if ev.Error != nil {
			res.Errors = append(res.Errors, ev.Error.Message)
		}
	case "error":
		res.Errors = append(res.Errors, ev.Message)
	}
	return nil
}
