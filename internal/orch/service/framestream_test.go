package service

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/orch/api"
)

// flushCounter is an answer that counts its flushes and what each one carried.
type flushCounter struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	flushed []string
}

func (f *flushCounter) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.buf.Write(p)
}

func (f *flushCounter) Flush() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.flushed = append(f.flushed, f.buf.String())
	f.buf.Reset()
}

func (f *flushCounter) writes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.flushed...)
}

func newFrames(stopping context.Context) (*frameStream, *flushCounter) {
	w := &flushCounter{}
	return &frameStream{enc: json.NewEncoder(w), flusher: w, stopping: stopping}, w
}

// TestFrameStream_HoldsStderrOnly: lines of the CLI's stderr followed by the end reach it in
// one write; the handle, the id and stdout are written at once, with the stderr lines before
// them, in order; a stderr line with nothing after it is written within errFrameHold; and
// nothing is written once the handler returned or serve stops.
func TestFrameStream_HoldsStderrOnly(t *testing.T) {
	s, w := newFrames(context.Background())
	for _, f := range []api.HandoffFrame{{Handle: "h"}, {ID: "01J"}, {Err: "accepted\n"}, {Out: "01J\n"}} {
		if err := s.send(f); err != nil {
			t.Fatal(err)
		}
	}
	if got := w.writes(); len(got) != 3 || got[0] != `{"handle":"h"}`+"\n" || got[2] != `{"err":"accepted\n"}`+"\n"+`{"out":"01J\n"}`+"\n" {
		t.Fatalf("writes %q: want the handle, the id, then the stderr line with stdout", got)
	}
	for _, f := range []api.HandoffFrame{{Err: "a\n"}, {Err: "b\n"}, {Err: "c\n"}, {End: &api.HandoffEnd{Exit: 3}}} {
		if err := s.send(f); err != nil {
			t.Fatal(err)
		}
	}
	if got := w.writes(); len(got) != 4 || strings.Count(got[3], "\n") != 4 || !strings.HasSuffix(got[3], `{"end":{"exit":3}}`+"\n") {
		t.Fatalf("the end's burst took writes %q: want one of four frames", got[3:])
	}
	if err := s.send(api.HandoffFrame{Err: "started\n"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(w.writes()) != 5 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := w.writes(); len(got) != 5 || got[4] != `{"err":"started\n"}`+"\n" {
		t.Fatalf("a held stderr line alone: writes %q", got)
	}

	s.send(api.HandoffFrame{Err: "late\n"})
	s.close()
	time.Sleep(3 * errFrameHold)
	if got := w.writes(); len(got) != 5 {
		t.Errorf("written after the handler returned: %q", got[5:])
	}
	if err := s.send(api.HandoffFrame{Out: "x"}); err == nil {
		t.Error("a frame was taken after the handler returned")
	}

	stopping, stop := context.WithCancel(context.Background())
	s, w = newFrames(stopping)
	s.send(api.HandoffFrame{Err: "before\n"})
	stop()
	if err := s.send(api.HandoffFrame{End: &api.HandoffEnd{Exit: 1, Error: "sql: database is closed"}}); err == nil {
		t.Error("the end was sent after serve stopped")
	}
	time.Sleep(3 * errFrameHold)
	if got := w.writes(); len(got) != 0 {
		t.Errorf("written after serve stopped: %q", got)
	}
}
