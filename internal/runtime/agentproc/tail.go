package agentproc

import (
	"strings"
	"sync"
)

// Writer keeps the last Max bytes written to it: the end of a CLI's stderr is where its error
// is. It is safe for concurrent use (exec's stderr
// copier writes while the runtime may read).
type Writer struct {
	Max int

	mu  sync.Mutex // guards buf
	buf []byte
}

func (t *Writer) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if over := len(t.buf) - t.Max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(b), nil
}

// String returns what is kept.
func (t *Writer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// OneLine folds s onto one printable line (control characters dropped, runs of white space
// made one space) and keeps its last n bytes, cut on a UTF-8 boundary.
func OneLine(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\r' || r == '\t':
			return ' '
		case r < 0x20 || r == 0x7f || r == '\uFFFD':
			return -1
		}
		return r
	}, strings.ToValidUTF8(s, ""))
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		i := len(s) - n
		for i < len(s) && (s[i]&0xC0) == 0x80 {
			i++
		}
		s = s[i:]
	}
	return s
}
