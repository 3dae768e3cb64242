package redact

import (
	"errors"
	"io"
)

// ErrClosed is returned by a write to a [Redactor.Writer] after Close.
var ErrClosed = errors.New("write redacted stream: writer is closed")

// Writer returns a WriteCloser that writes to w what [Redactor.Bytes] would return for everything
// written to it, however the input is split into writes. A form split across writes is still
// masked: the writer holds back at most (longest form length - 1) bytes until it knows they
// start no form, and never passes part of a form through. Close flushes what is held back; it
// does not close w. After an error from w every call returns that error.
//
// The writer is not safe for concurrent use.
func (r *Redactor) Writer(w io.Writer) io.WriteCloser {
	if r.strict != nil {
		return &strictWriter{x: r.strict, w: w, own: true}
	}
	return &writer{r: r, w: w}
}

type writer struct {
	r       *Redactor
	w       io.Writer
	pending []byte // input not yet final: starts at the cursor's offset 0
	c       cursor
	out     []byte // reused output buffer
	err     error  // sticky error from w
	closed  bool
}

func (w *writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if w.closed {
		return 0, ErrClosed
	}
	w.pending = append(w.pending, p...)
	// A form starting before limit ends within pending, so those starts can be decided now.
	limit := len(w.pending) - max(w.r.maxLen-1, 0)
	if limit <= w.c.next {
		return len(p), nil
	}
	if err := w.emit(limit); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Close flushes the held-back bytes to the underlying writer.
func (w *writer) Close() error {
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return nil
	}
	w.closed = true
	return w.emit(len(w.pending))
}

// emit writes the output that is final up to limit and drops the input before limit.
func (w *writer) emit(limit int) error {
	w.out = w.r.advance(&w.c, w.pending, limit, w.out[:0])
	if len(w.out) > 0 {
		if _, err := w.w.Write(w.out); err != nil {
			w.err = err
			return err
		}
	}
	// Every start before limit is decided and the bytes before limit are emitted or dropped, so
	// rebase the buffer on limit; regionEnd may become negative, which means "no open region".
	n := copy(w.pending, w.pending[limit:])
	w.pending = w.pending[:n]
	w.c.base -= limit
	w.c.next -= limit
	w.c.regionEnd -= limit
	return nil
}
