package cmdutil

import (
	"io"
	"unicode/utf8"

	"github.com/agora-dev/agora/internal/agenttext"
)

// AgentOut is where a command copies bytes an agent wrote (a dispatch's logs, its
// transcript): f's stdout as it is when that is a file or a pipe (the bytes, for tools), and
// through agenttext's escaping when it is a terminal, where an escape sequence in a log could
// move the cursor, rewrite what is shown or reach the clipboard. Close writes what is held.
func AgentOut(f *Factory) io.WriteCloser {
	if !f.IO.OutTTY {
		return nopCloser{f.IO.Out}
	}
	return &escapeWriter{w: f.IO.Out}
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// escapeWriter escapes what passes through it with [agenttext.Escape], holding back the bytes
// of a character cut between two writes (so a character is never escaped as two invalid
// halves).
type escapeWriter struct {
	w    io.Writer
	held []byte
}

func (e *escapeWriter) Write(p []byte) (int, error) {
	buf := append(e.held, p...)
	cut := len(buf)
	// Hold back an incomplete UTF-8 character at the end (at most 3 bytes).
	for i := len(buf) - 1; i >= 0 && i >= len(buf)-utf8.UTFMax+1; i-- {
		if utf8.RuneStart(buf[i]) {
			if !utf8.FullRune(buf[i:]) {
				cut = i
			}
			break
		}
	}
	if _, err := io.WriteString(e.w, agenttext.Escape(string(buf[:cut]))); err != nil {
		return 0, err
	}
	e.held = append(e.held[:0], buf[cut:]...)
	return len(p), nil
}

func (e *escapeWriter) Close() error {
	if len(e.held) == 0 {
		return nil
	}
	_, err := io.WriteString(e.w, agenttext.Escape(string(e.held)))
	e.held = nil
	return err
}
