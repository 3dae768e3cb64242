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

// newLogSink writes into f, a log file the supervisor made itself (see createLog).
func newLogSink(f *os.File, limit int64, red *redact.Redactor) *logSink {
	c := &capWriter{w: f, left: limit}
	return &logSink{f: f, red: red.Writer(c), cap: c}
}

// createLog makes the log at path, a new file of the supervisor's own: O_EXCL, so whatever
// else is at the name (with `sandbox: none` the worker can write the stage: a link to a file
// of the host's, a FIFO) is never opened, let alone written through or blocked on; it is
// removed (the name only: a link is not followed) and the file made again, twice at most.
func createLog(path string) (*os.File, error) {
	var err error
	for range 3 {
		var f *os.File
		if f, err = os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_NOFOLLOW, 0o600); err == nil {
			return f, nil
		}
		if !errors.Is(err, os.ErrExist) {
			break
		}
		if rerr := os.Remove(path); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			return nil, fmt.Errorf("make log %s: something is in its place that cannot be removed: %w", filepath.Base(path), rerr)
		}
	}
	return nil, fmt.Errorf("make log %s: %w", filepath.Base(path), err)
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
