package dispatch

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/agora-dev/agora/internal/secret/redact"
)

// logSink caps and redacts one stream into a file. The redactor sits first, so the cap counts
// redacted bytes and a secret is never split by the cap into an unredacted prefix.
type logSink struct {
	mu        sync.Mutex // the sandbox's stream and the proxy's notices
	f         *os.File
	red       io.WriteCloser
	cap       *capWriter
	truncated bool
	closed    bool
}

func newLogSink(path string, limit int64, red *redact.Redactor) (*logSink, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	c := &capWriter{w: f, left: limit}
	return &logSink{f: f, red: red.Writer(c), cap: c}, nil
}

// appendLogSink is newLogSink appending to path: an adopted dispatch's logs go on after what
// its first supervisor wrote, and limit counts both.
func appendLogSink(path string, limit int64, red *redact.Redactor) (*logSink, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("reopen log %s: not a regular file (%v)", filepath.Base(path), err)
	}
	c := &capWriter{w: f, left: max(limit-fi.Size(), 0)}
	return &logSink{f: f, red: red.Writer(c), cap: c}, nil
}

func (l *logSink) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.red.Write(p)
}

// notice adds one line of agora's own to the log (the egress proxy's refusals, which a
// client such as git reports only as a status code), between the sandbox's writes.
func (l *logSink) notice(line string) {
	l.Write([]byte("agora: " + line + "\n"))
}

// Close flushes the redactor and closes the file; a second Close does nothing.
func (l *logSink) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	err := l.red.Close()
	l.truncated = l.cap.dropped
	return errors.Join(err, l.f.Close())
}

type capWriter struct {
	w       io.Writer
	left    int64
	dropped bool
}

func (c *capWriter) Write(p []byte) (int, error) {
	n := len(p)
	if int64(len(p)) > c.left {
		p = p[:c.left]
		c.dropped = true
	}
	if len(p) > 0 {
		if _, err := c.w.Write(p); err != nil {
			return 0, err
		}
		c.left -= int64(len(p))
	}
	return n, nil
}
