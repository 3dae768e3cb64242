package budget

import (
	"bytes"
	"encoding/json"
)

// Caps on what a Response holds while it reads a body: an event line (a Responses
// response.completed event repeats the whole output, so it may be long) and a top-level
// value of a plain body. Longer ones are not parsed; Result then reports no usage, which
// the Meter treats as a budget it cannot count (fail closed).
const (
	MaxEventLine = 8 << 20
	maxCapture   = 64 << 10
)

// Response reads one model response's usage as its body passes, without holding the body:
// an event stream line by line (only "data:" lines that mention usage are decoded), a plain
// JSON body through a scanner that keeps only its top-level "model" and "usage" values. It is
// an io.Writer, so the gateway tees the body into it. Not safe for concurrent use.
type Response struct {
	shape  Shape
	stream bool
	line   []byte // an event line not yet ended
	over   bool   // the current line passed MaxEventLine: skip to its end
	top    topScan
	model  string
	usage  Usage
	seen   bool
}

// NewResponse reads a response of shape; stream says the body is text/event-stream.
func NewResponse(shape Shape, stream bool) *Response {
	return &Response{shape: shape, stream: stream}
}

// Write feeds the next bytes of the body. It never fails.
func (r *Response) Write(p []byte) (int, error) {
	if !r.stream {
		r.top.feed(p)
		return len(p), nil
	}
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			r.appendLine(p)
			break
		}
		r.appendLine(p[:i])
		if !r.over {
			r.event(r.line)
		}
		r.line, r.over = r.line[:0], false
		p = p[i+1:]
	}
	return n, nil
}

func (r *Response) appendLine(p []byte) {
	if r.over {
		return
	}
	if len(r.line)+len(p) > MaxEventLine {
		r.line, r.over = r.line[:0], true
		return
	}
	r.line = append(r.line, p...)
}

// event decodes one complete line of an event stream.
func (r *Response) event(line []byte) {
	data, ok := bytes.CutPrefix(bytes.TrimSuffix(line, []byte("\r")), []byte("data:"))
	if !ok || !bytes.Contains(data, []byte(`"usage"`)) {
		return
	}
	r.take(r.shape.decodeEnvelope(bytes.TrimSpace(data)))
}

func (r *Response) take(model string, u Usage, ok bool) {
	if model != "" {
		r.model = model
	}
	if ok {
		r.usage, r.seen = merge(r.usage, u), true
	}
}

// Result is what the response reported: the model that answered ("" when it said none), its
// usage (tokens only), and whether any usage was reported at all.
func (r *Response) Result() (model string, u Usage, seen bool) {
	if r.stream {
		if len(r.line) > 0 && !r.over { // a last line without its newline
			r.event(r.line)
			r.line = r.line[:0]
		}
		return r.model, r.usage, r.seen
	}
	var name string
	if r.top.model != nil && json.Unmarshal(r.top.model, &name) == nil {
		r.model = name
	}
	if r.top.usage != nil {
		_, u, ok := r.shape.decodeEnvelope(append(append([]byte(`{"usage":`), r.top.usage...), '}'))
		r.usage, r.seen = u, ok
	}
	return r.model, r.usage, r.seen
}

// topScan walks a JSON object byte by byte and keeps the raw values of its top-level keys
// "model" and "usage" (each at most maxCapture bytes); everything else passes unkept.
type topScan struct {
	depth     int
	inStr     bool
	esc       bool
	expectKey bool   // at depth 1, the next string is a key
	keying    bool   // reading a top-level key
	key       []byte // the key being read (capped)
	lastKey   string
	capturing *[]byte // where the current top-level value goes, or nil
	capFull   bool
	model     []byte
	usage     []byte
	broken    bool // not an object, or unbalanced: stop
}

func (s *topScan) feed(p []byte) {
	for _, c := range p {
		if s.broken {
			return
		}
		s.step(c)
	}
}

func (s *topScan) step(c byte) {
	if s.capturing != nil && s.depth >= 1 {
		if len(*s.capturing) >= maxCapture {
			s.capFull = true
		} else {
			*s.capturing = append(*s.capturing, c)
		}
	}
	if s.inStr {
		switch {
		case s.esc:
			s.esc = false
		case c == '\\':
			s.esc = true
		case c == '"':
			s.inStr = false
			if s.keying {
				s.keying, s.lastKey = false, string(s.key)
			}
		default:
			if s.keying && len(s.key) < 16 {
				s.key = append(s.key, c)
			}
		}
		return
	}
	switch c {
	case '"':
		s.inStr = true
		if s.depth == 1 && s.expectKey {
			s.keying, s.expectKey, s.key = true, false, s.key[:0]
		}
	case '{', '[':
		if s.depth == 0 && c != '{' {
			s.broken = true
			return
		}
		s.depth++
		if s.depth == 1 {
			s.expectKey = true
		}
	case '}', ']':
		s.depth--
		if s.depth == 0 {
			s.endValue()
			s.broken = true // the object is complete; anything after it is not ours
			return
		}
		if s.depth < 0 {
			s.broken = true
		}
	case ':':
		if s.depth == 1 {
			s.startValue()
		}
	case ',':
		if s.depth == 1 {
			s.endValue()
			s.expectKey = true
		}
	}
}

// startValue begins keeping the value of the key just read, if it is one we want.
func (s *topScan) startValue() {
	s.capturing, s.capFull = nil, false
	switch s.lastKey {
	case "model":
		s.model = []byte{}
		s.capturing = &s.model
	case "usage":
		s.usage = []byte{}
		s.capturing = &s.usage
	}
}

// endValue ends a kept value: the ',' or '}' that ended it was appended last and is cut.
func (s *topScan) endValue() {
	if s.capturing == nil {
		return
	}
	v := *s.capturing
	if len(v) > 0 {
		v = v[:len(v)-1]
	}
	if s.capFull {
		v = nil
	}
	*s.capturing, s.capturing = v, nil
}
