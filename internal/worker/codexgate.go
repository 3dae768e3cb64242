package worker

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
)

// maxGateEvent bounds one server-sent event the gate holds while it checks it.
const maxGateEvent = 16 << 20

// gateResponse returns the codex relay's response hook: a successful event stream is passed
// to codex event by event, each exec_command call the model makes held until check has
// decided it (check returns an error to refuse it); a refused call cuts the stream before
// codex sees the call, so it never runs. A successful answer that is not an event stream
// (codex always streams) is refused whole: it could carry a call the gate cannot see.
func gateResponse(check func(callID, cmd string) error) func(*http.Response) error {
	return func(resp *http.Response) error {
		if resp.StatusCode < 200 || resp.StatusCode >= 300 {
			return nil
		}
		if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
			resp.Body.Close()
			resp.Body = io.NopCloser(&errReader{errors.New("agora relay: a model answer that is not an event stream is refused for codex")})
			return nil
		}
		resp.Body = &execGate{src: bufio.NewReaderSize(resp.Body, 64<<10), body: resp.Body, check: check}
		return nil
	}
}

type errReader struct{ err error }

func (e *errReader) Read([]byte) (int, error) { return 0, e.err }

// execGate is an event stream held one event at a time (see gateResponse).
type execGate struct {
	src   *bufio.Reader
	body  io.Closer
	check func(callID, cmd string) error
	out   []byte // the checked event not yet read
	err   error  // what Read returns once out is drained
}

func (g *execGate) Read(p []byte) (int, error) {
	for len(g.out) == 0 {
		if g.err != nil {
			return 0, g.err
		}
		g.fill()
	}
	n := copy(p, g.out)
	g.out = g.out[n:]
	return n, nil
}

func (g *execGate) Close() error { return g.body.Close() }

// fill reads one event, through its blank line, and releases it once checked.
func (g *execGate) fill() {
	var ev []byte
	for {
		line, err := g.src.ReadSlice('\n')
		ev = append(ev, line...)
		if len(ev) > maxGateEvent {
			g.err = errors.New("agora relay: an event over the size limit")
			return
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			g.err = err
			break
		}
		if len(bytes.TrimRight(line, "\r\n")) == 0 {
			break
		}
	}
	if err := g.inspect(ev); err != nil {
		g.err = err
		return
	}
	g.out = ev
}

// gateItem is the part of an output item the gate reads.
type gateItem struct {
	Type      string `json:"type"`
	Name      string `json:"name"`
	CallID    string `json:"call_id"`
	Arguments string `json:"arguments"`
}

// gateEvent is the part of an event the gate reads: an item done, or the completed
// response's whole output (which repeats the calls).
type gateEvent struct {
	Type     string    `json:"type"`
	Item     *gateItem `json:"item"`
	Response *struct {
		Output []gateItem `json:"output"`
	} `json:"response"`
}

// inspect checks every exec_command call an event completes. The event's data lines are
// joined as an SSE client joins them (so a call split over several lines is seen whole), and
// the payload is decoded whenever it could name a call: it holds "exec_command" or a
// backslash (a JSON escape such as exec\u005fcommand spells the name
// without its bytes). Such a payload that cannot be read is refused: it might be a call.
func (g *execGate) inspect(ev []byte) error {
	var data [][]byte
	for _, line := range bytes.Split(ev, []byte("\n")) {
		d, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r"), []byte("data:"))
		if ok {
			data = append(data, bytes.TrimPrefix(d, []byte(" ")))
		}
	}
	payload := bytes.Join(data, []byte("\n"))
	if !bytes.Contains(payload, []byte("exec_command")) && !bytes.Contains(payload, []byte("\\")) {
		return nil
	}
	var e gateEvent
	if err := json.Unmarshal(payload, &e); err != nil {
		return errors.New("agora relay: an unreadable event that may name a command")
	}
	var items []gateItem
	switch {
	case e.Type == "response.output_item.done" && e.Item != nil:
		items = append(items, *e.Item)
	case e.Type == "response.completed" && e.Response != nil:
		items = e.Response.Output
	}
	for _, it := range items {
		if it.Type != "function_call" || it.Name != "exec_command" {
			continue
		}
		var args struct {
			Cmd string `json:"cmd"`
		}
		if err := json.Unmarshal([]byte(it.Arguments), &args); err != nil {
			args.Cmd = it.Arguments // checked as written: it will match no grant
		}
		if err := g.check(it.CallID, args.Cmd); err != nil {
			return err
		}
	}
	return nil
}
