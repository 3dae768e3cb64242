package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/agora-dev/agora/internal/compute/remote"
)

// Limits of a stream.
const (
	// maxBacklog caps the output a stream holds for the host. While a POST carries it, a
	// write waits for room (as a pipe would); while the gateway is away, output past it is
	// dropped, counted, and the host is told how much when the stream is back.
	maxBacklog = 1 << 20
	// closeWait bounds how long closing a stream waits for the host to take what is left.
	closeWait = 30 * time.Second
)

// stream is the worker's output to streams/NAME: one long chunked POST, made again when the
// gateway drops it (a restart), until [OutageLimit] without one.
type stream struct {
	c      *Client
	name   string
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	kick   chan struct{} // close: try again now, not after the backoff

	mu       sync.Mutex
	cond     sync.Cond // on mu: buf changed, the stream closed, or a POST's body closed
	buf      []byte    // guarded by mu: written, not yet read by a POST
	carrying bool      // guarded by mu: a POST's body is open
	dropped  int64     // guarded by mu: bytes dropped while no POST carried the stream
	closed   bool      // guarded by mu: no more writes; the POST ends once buf is read
	dead     bool      // guarded by mu: the stream gave up; writes are dropped
	opened   bool      // guarded by mu: a POST was opened before (the next one was cut)
}

func (c *Client) openStream(name string) *stream {
	ctx, cancel := context.WithCancel(context.Background())
	s := &stream{c: c, name: name, ctx: ctx, cancel: cancel, done: make(chan struct{}), kick: make(chan struct{}, 1)}
	s.cond.L = &s.mu
	go s.run()
	return s
}

// run keeps a POST carrying the stream until the stream is closed and its output taken. The
// gateway answers a stream's POST at once and ends the answer with remote.StreamDone when the
// output reached the host; an answer that ends otherwise means the gateway went away, and the
// body is closed at once, so what is written next waits for the next POST instead of going
// into a dead connection.
func (s *stream) run() {
	defer close(s.done)
	route := "streams/" + s.name
	r := s.c.retry("POST " + route)
	for {
		body := &streamBody{s: s}
		s.mu.Lock()
		s.carrying = true
		s.mu.Unlock()
		resp, err := s.c.once(s.ctx, http.MethodPost, route, body)
		if err == nil {
			if resp.StatusCode == http.StatusOK {
				var b []byte
				b, err = io.ReadAll(io.LimitReader(resp.Body, int64(len(remote.StreamDone))+1))
				if err == nil && string(b) != remote.StreamDone {
					err = fmt.Errorf("POST %s: the gateway ended the stream", route)
				}
			} else {
				err = statusError(http.MethodPost, route, resp)
			}
			resp.Body.Close()
		}
		body.Close()
		s.mu.Lock()
		end := s.closed && len(s.buf) == 0
		s.mu.Unlock()
		switch {
		case err == nil && end:
			return
		case err == nil:
			err = fmt.Errorf("POST %s: the gateway ended the stream early", route)
		}
		var se *StatusError
		if errors.As(err, &se) && !transientStatus(se.Code) || !errors.As(err, &se) && !transient(s.ctx, err) {
			s.giveUp()
			return
		}
		if body.read {
			r.first = time.Time{} // it carried output: a new outage starts now
		}
		if r.waitOr(s.ctx, err, s.kick) != nil {
			s.giveUp()
			return
		}
	}
}

// giveUp drops what is left and every later write.
func (s *stream) giveUp() {
	s.mu.Lock()
	s.dead, s.buf = true, nil
	s.cond.Broadcast()
	s.mu.Unlock()
}

// write queues p for the host, or drops it once the stream gave up: the container log keeps a
// copy.
func (s *stream) write(p []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(p) > 0 && !s.dead {
		room := maxBacklog - len(s.buf)
		if room <= 0 {
			if !s.carrying {
				s.dropped += int64(len(p))
				return
			}
			s.cond.Wait()
			continue
		}
		n := min(room, len(p))
		s.buf = append(s.buf, p[:n]...)
		p = p[n:]
		s.cond.Broadcast()
	}
}

// close ends the stream and waits, at most closeWait, for the host to take the rest.
func (s *stream) close() {
	s.mu.Lock()
	s.closed = true
	s.cond.Broadcast()
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
	select {
	case <-s.done:
	case <-time.After(closeWait):
		s.cancel()
		<-s.done
	}
	s.cancel()
}

// streamBody is one POST's body: it hands out what the stream holds, waiting for more, and
// ends once the stream is closed and drained. A POST that the gateway dropped loses what its
// connection had not delivered; the next POST opens with a line saying the output was cut.
type streamBody struct {
	s      *stream
	read   bool // it handed out output
	noted  bool
	closed bool // guarded by s.mu
}

func (b *streamBody) Read(p []byte) (int, error) {
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if !b.noted {
		b.noted = true
		if note := s.gapNote(); note != "" {
			return copy(p, note), nil
		}
	}
	for len(s.buf) == 0 && !s.closed && !b.closed && !s.dead {
		s.cond.Wait()
	}
	switch {
	case b.closed || s.dead:
		return 0, io.ErrClosedPipe
	case len(s.buf) == 0:
		return 0, io.EOF
	}
	n := copy(p, s.buf)
	s.buf = s.buf[n:]
	if len(s.buf) == 0 {
		s.buf = nil // let a large backlog's array go
	}
	b.read = true
	s.cond.Broadcast()
	return n, nil
}

func (b *streamBody) Close() error {
	b.s.mu.Lock()
	if !b.closed {
		b.closed = true
		b.s.carrying = false
		b.s.cond.Broadcast()
	}
	b.s.mu.Unlock()
	return nil
}

// gapNote is the line that opens a POST after one was dropped; "" for the first. s.mu is held.
func (s *stream) gapNote() string {
	if !s.opened {
		s.opened = true
		return ""
	}
	note := "\n[agora worker: the output stream to the host was interrupted (the gateway restarted?); output may be missing here"
	if s.dropped > 0 {
		note += fmt.Sprintf("; %d bytes were dropped", s.dropped)
		s.dropped = 0
	}
	return note + "]\n"
}

// tee writes to the container's stream and the gateway's.
type tee struct {
	local  io.Writer
	remote *stream
}

func (t *tee) Write(p []byte) (int, error) {
	n, err := t.local.Write(p)
	t.remote.write(p)
	return n, err
}
