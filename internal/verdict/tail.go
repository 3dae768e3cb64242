package verdict

import (
	"strings"
	"sync"
	"unicode/utf8"
)

// Tail is an io.Writer that keeps the last [MaxTail] bytes written to it and counts them
// all, in constant memory whatever the command writes. It is safe for concurrent use (stdout
// and stderr share one). The host puts it behind the redactor, so it keeps redacted bytes.
type Tail struct {
	mu    sync.Mutex
	buf   []byte // a ring of MaxTail bytes once full
	next  int    // where the next byte goes once full
	full  bool
	total int64
}

// Write keeps the end of p; it never fails.
func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	t.total += int64(n)
	if len(p) >= MaxTail {
		t.buf = append(t.buf[:0], p[len(p)-MaxTail:]...)
		t.next, t.full = 0, true
		return n, nil
	}
	if !t.full {
		if len(t.buf)+len(p) <= MaxTail {
			t.buf = append(t.buf, p...)
			return n, nil
		}
		grow := MaxTail - len(t.buf)
		t.buf = append(t.buf, p[:grow]...)
		p = p[grow:]
		t.full, t.next = true, 0
	}
	for len(p) > 0 {
		c := copy(t.buf[t.next:], p)
		p = p[c:]
		t.next = (t.next + c) % MaxTail
	}
	return n, nil
}

// TailText is what a [Tail] kept: valid UTF-8, at most [MaxTail] bytes.
type TailText struct {
	Text  string
	Total int64 // bytes written in all
}

// Text returns the kept end as valid UTF-8: a character cut at the start is dropped, and
// invalid bytes become U+FFFD without growing the text past MaxTail.
func (t *Tail) Text() TailText {
	t.mu.Lock()
	raw := make([]byte, 0, len(t.buf))
	if t.full {
		raw = append(append(raw, t.buf[t.next:]...), t.buf[:t.next]...)
	} else {
		raw = append(raw, t.buf...)
	}
	total := t.total
	t.mu.Unlock()
	if t.full || int64(len(raw)) < total {
		// The first bytes may be the middle of a character.
		for i := 0; i < utf8.UTFMax && len(raw) > 0 && !utf8.RuneStart(raw[0]); i++ {
			raw = raw[1:]
		}
	}
	s := strings.ToValidUTF8(string(raw), "\uFFFD")
	for len(s) > MaxTail {
		// U+FFFD is 3 bytes: replacements can grow the text; drop from the front.
		_, n := utf8.DecodeRuneInString(s)
		s = s[n:]
	}
	return TailText{Text: s, Total: max(total, int64(len(s)))}
}
