package remote

import (
	"context"
	"io"
	"net/http"
	"sync"
)

// stream is one long chunked POST of the worker's output to streams/NAME.
type stream struct {
	pw   *io.PipeWriter
	done chan struct{}

	mu     sync.Mutex
	broken bool // guarded by mu: the POST failed; later writes are dropped
}

func (c *Client) openStream(name string) *stream {
	pr, pw := io.Pipe()
	s := &stream{pw: pw, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		resp, err := c.do(context.Background(), http.MethodPost, "streams/"+name, pr, http.StatusNoContent)
		if err == nil {
			resp.Body.Close()
		}
		// Whatever ended the POST, a write now fails at once instead of blocking.
		pr.CloseWithError(io.ErrClosedPipe)
	}()
	return s
}

// write sends p, or drops it once the stream broke: the container log keeps a copy.
func (s *stream) write(p []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.broken {
		return
	}
	if _, err := s.pw.Write(p); err != nil {
		s.broken = true
	}
}

// close ends the POST and waits for the gateway's answer: then the output reached the host.
func (s *stream) close() {
	s.pw.Close()
	<-s.done
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
