package codexadapter

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"mime"
	"net/http"
)

// maxGateEvent bounds one server-sent event the gate holds while it checks it.
const maxGateEvent = 16 << 20

// gateResponse returns the codex relay's response hook: a successful event stream is passed
// to codex event by event, each event read exactly (codexevent.go) and every call of a tool
// it carries held until judge has decided it (judge returns an error to refuse it). A refused
// call, or an event the gate cannot read exactly, cuts the stream before codex reads that
// event, so nothing in it runs. A successful answer that is not a plain event stream (codex
// always streams; a content coding would hide the events) is refused whole.
func gateResponse(judge func(modelCall) error) func(*http.Response) error {
	return learnGate(judge, nil)
}

// learnGate is gateResponse whose gate, when rewrite is not nil (a learn dispatch), gives
// codex each apply_patch call's patch as rewrite returns it (codexlearn.go).
func learnGate(judge func(modelCall) error, rewrite func(callID, patch string) (string, bool)) func(*http.Response) error {
	return func(resp *http.Response) error {
		if resp.StatusCode == http.StatusSwitchingProtocols {
			// A WebSocket (Codex can speak the Responses API over one) would carry the
			// model's calls past the gate, which reads event streams only: refused, and the
			// relay answers codex 502 instead of switching.
			why := "the model's answer switches protocols (a WebSocket), which the gate cannot read"
			_ = judge(modelCall{Tool: modelAnswerTool, Refused: why})
			return errors.New("agora relay: " + why)
		}
		if resp.StatusCode < 200 || resp.StatusCode >= 300 {
			return nil
		}
		mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
		ce := resp.Header.Get("Content-Encoding")
		if mt != "text/event-stream" || ce != "" && ce != "identity" {
			resp.Body.Close()
			resp.Body = io.NopCloser(&errReader{errors.New("agora relay: a model answer that is not a plain event stream is refused for codex")})
			_ = judge(modelCall{Tool: modelAnswerTool, Refused: "the model's answer is not a plain event stream (codex always streams)"})
			return nil
		}
		resp.Body = &callGate{src: bufio.NewReaderSize(resp.Body, 64<<10), body: resp.Body, judge: judge, rewrite: rewrite}
		return nil
	}
}

type errReader struct{ err error }

func (e *errReader) Read([]byte) (int, error) { return 0, e.err }

// callGate is an event stream held one event at a time (see gateResponse).
type callGate struct {
	src     *bufio.Reader
	body    io.Closer
	judge   func(modelCall) error
	started bool   // the first line has been read (a byte order mark may only start it)
	out     []byte // the checked event not yet read
	err     error  // what Read returns once out is drained
	// rewrite, set in a learn dispatch only, returns the patch codex is to read instead of an
	// apply_patch call's patch, once judge has passed the call (codexlearn.go).
	rewrite func(callID, patch string) (string, bool)
	// patchItems are the item ids of apply_patch function calls (rewrite only).
	patchItems map[string]bool
}

func (g *callGate) Read(p []byte) (int, error) {
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

func (g *callGate) Close() error { return g.body.Close() }

// fill reads one event, through its blank line, and releases it once checked.
func (g *callGate) fill() {
	var ev []byte
	for {
		line, err := g.src.ReadSlice('\n')
		ev = append(ev, line...)
		if len(ev) > maxGateEvent {
			g.refuse("an event over the gate's size limit")
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
	if len(ev) == 0 {
		return
	}
	payload, calls, why := g.read(ev)
	if why != "" {
		g.refuse(why)
		return
	}
	for _, c := range calls {
		if err := g.judge(c); err != nil {
			g.err = err
			return
		}
	}
	if g.rewrite != nil && len(payload) > 0 {
		if ev, why = g.rewritten(ev, payload); why != "" {
			g.refuse(why)
			return
		}
	}
	g.out = ev
}

// refuse cuts the stream for an event the gate cannot read exactly; judge records why.
func (g *callGate) refuse(why string) {
	g.err = g.judge(modelCall{Tool: modelAnswerTool, Refused: why})
	if g.err == nil {
		g.err = errors.New("agora relay: " + why)
	}
}

// read returns the calls one event carries, or why the event cannot be read exactly. The
// event's lines are read as the SSE standard has a client read them (data lines joined with
// newlines; comments and other fields ignored), except what a client could read otherwise
// than the gate: a lone carriage return (a line break to an SSE client), a byte order mark
// anywhere but at the very start, a NUL.
//
// [SSE]: https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation
func (g *callGate) read(ev []byte) ([]byte, []modelCall, string) {
	if !g.started {
		g.started = true
		ev = bytes.TrimPrefix(ev, []byte("\xef\xbb\xbf"))
	}
	var data [][]byte
	for _, line := range bytes.SplitAfter(ev, []byte("\n")) {
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		switch {
		case bytes.IndexByte(line, '\r') >= 0:
			return nil, nil, "an event line holds a carriage return (an event stream client reads it as a line break)"
		case bytes.Contains(line, []byte("\xef\xbb\xbf")), bytes.IndexByte(line, 0) >= 0:
			return nil, nil, "an event line holds a byte order mark or a NUL"
		case len(line) == 0, line[0] == ':':
			continue
		}
		name, value, _ := bytes.Cut(line, []byte(":"))
		if string(name) == "data" {
			data = append(data, bytes.TrimPrefix(value, []byte(" ")))
		}
	}
	payload := bytes.Join(data, []byte("\n"))
	if len(payload) == 0 {
		return nil, nil, "" // an event with no data is not dispatched
	}
	calls, why := eventCalls(payload)
	return payload, calls, why
}
