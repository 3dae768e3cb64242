package service

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/agora-dev/agora/internal/orch/api"
)

// handoffRoute is the hand-off's route pattern.
const handoffRoute = "POST " + api.HandoffPath

// errServeStopping is a frame not sent because serve is stopping.
var errServeStopping = errors.New("serve is stopping")

// handoffs holds the cancel of each hand-off in flight by its handle (Ctrl-C in the CLI).
type handoffs struct {
	mu      sync.Mutex
	cancels map[string]context.CancelFunc
}

func (h *handoffs) add(cancel context.CancelFunc) (string, func()) {
	var b [16]byte
	rand.Read(b[:])
	handle := hex.EncodeToString(b[:])
	h.mu.Lock()
	if h.cancels == nil {
		h.cancels = map[string]context.CancelFunc{}
	}
	h.cancels[handle] = cancel
	h.mu.Unlock()
	return handle, func() {
		h.mu.Lock()
		delete(h.cancels, handle)
		h.mu.Unlock()
	}
}

func (h *handoffs) cancel(handle string) bool {
	h.mu.Lock()
	c, ok := h.cancels[handle]
	h.mu.Unlock()
	if ok {
		c()
	}
	return ok
}

// handoff answers POST api.HandoffPath: a declined or malformed request gets one JSON error;
// a taken one a stream of frames (api.HandoffFrame) until its end.
func (s *Server) handoff(w http.ResponseWriter, r *http.Request) {
	if s.Handoff == nil {
		writeErr(w, http.StatusNotFound, "not_found", "this orchestrator takes no hand-offs")
		return
	}
	peer, _ := r.Context().Value(peerKey{}).(peerInfo)
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeErr(w, http.StatusRequestEntityTooLarge, "invalid", "request body too large")
			return
		}
		writeErr(w, http.StatusBadRequest, "invalid", "read request body: "+err.Error())
		return
	}
	req, err := api.DecodeHandoffRequest(body)
	if err != nil {
		writeErr(w, http.StatusBadRequest, "invalid", err.Error())
		return
	}
	var run func(ctx context.Context, send func(api.HandoffFrame) error)
	if why := s.callerWidens(peer, req); why != "" {
		err = &api.Declined{Why: why}
		if hd, ok := s.Handoff.(handoffDecliner); ok {
			hd.Declined(api.Peer{PID: peer.pid, UID: peer.uid}, err.(*api.Declined))
		}
	} else {
		run, err = s.Handoff.Prepare(r.Context(), req, api.Peer{PID: peer.pid, UID: peer.uid})
	}
	var declined *api.Declined
	if errors.As(err, &declined) {
		if s.Log != nil {
			s.Log.Info("hand-off declined", "pid", peer.pid, "why", declined.Why)
		}
		writeErr(w, http.StatusConflict, api.HandoffDeclined, declined.Why)
		return
	}
	if err != nil {
		writeErr(w, http.StatusBadRequest, "invalid", err.Error())
		return
	}
	// The dispatch lives as long as the CLI's connection, as it would live as long as the
	// CLI's process: a CLI gone without a word cancels it, as does its Ctrl-C (cancel route).
	// serve stopping (a signal: the request's context ends too) is neither: the dispatch it
	// supervises itself dies with serve's process, and the CLI, whose stream then breaks,
	// reaps it as lost (or follows a standby's to its end), as operations.md says. So no frame
	// is sent once serve stops: not the end of a run cancelled or cut off (agora.db closed)
	// under it ('agora: error: sql: database is closed', no -o json).
	stopping := s.stopping
	if stopping == nil {
		stopping = context.Background()
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	stopGone := context.AfterFunc(r.Context(), func() {
		if stopping.Err() == nil {
			cancel()
		}
	})
	defer stopGone()
	handle, forget := s.handoffs.add(cancel)
	defer forget()
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	frames := &frameStream{enc: json.NewEncoder(w), flusher: flusher, stopping: stopping}
	defer frames.close()
	send := frames.send
	if send(api.HandoffFrame{Handle: handle}) != nil {
		// Called all the same, to start nothing: a resident counts a prepared hand-off in
		// flight until its run returns, and one never called kept a resident signalled
		// during Prepare in its drain for good.
		notStarted, stop := context.WithCancelCause(ctx)
		stop(api.ErrNotStarted)
		run(notStarted, send)
		return
	}
	if s.Log != nil {
		s.Log.Info("hand-off taken", "pid", peer.pid, "subagent", req.Subagent)
	}
	s.handoffCount.Add(1)
	run(ctx, send)
}

// errFrameHold is how long a frame of the CLI's stderr may wait for the next frame.
const errFrameHold = 2 * time.Millisecond

// frameStream writes a hand-off's frames to its answer, for the dispatch's goroutines and
// its progress goroutines alike. A frame of the CLI's stderr waits up to errFrameHold for the
// next one, so a burst (the end's lines, then the end) reaches the CLI in one write, not one
// write and one wake-up of the CLI each; every other frame goes at once, with what
// waited before it: the handle, the id, stdout (a script reads the dispatch's id there) and
// the end are never held.
type frameStream struct {
	mu       sync.Mutex
	enc      *json.Encoder
	flusher  http.Flusher // nil: each frame is written as encoded
	stopping context.Context
	held     *time.Timer // flushes what waits; nil when nothing does
	closed   bool        // the handler returned: its ResponseWriter is no longer ours
}

// send writes f, or says why not: no frame is sent once serve stops.
func (s *frameStream) send(f api.HandoffFrame) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return errHandoffClosed
	case s.stopping.Err() != nil:
		return errServeStopping
	}
	if err := s.enc.Encode(f); err != nil {
		return err
	}
	if f.Err != "" && s.flusher != nil {
		if s.held == nil {
			s.held = time.AfterFunc(errFrameHold, s.flushHeld)
		}
		return nil
	}
	s.flush()
	return nil
}

// flush writes out what was encoded; s.mu is held.
func (s *frameStream) flush() {
	if s.held != nil {
		s.held.Stop()
		s.held = nil
	}
	if s.flusher != nil {
		s.flusher.Flush()
	}
}

func (s *frameStream) flushHeld() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed && s.held != nil && s.stopping.Err() == nil {
		s.flush()
	}
}

// close ends the stream as the handler returns (net/http writes what is left of the answer).
func (s *frameStream) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.held != nil {
		s.held.Stop()
		s.held = nil
	}
}

// errHandoffClosed is a frame sent after the hand-off's answer ended.
var errHandoffClosed = errors.New("the hand-off's answer has ended")

// handoffCancel answers POST api.HandoffCancelPath: the hand-off's dispatch is cancelled
// as a Ctrl-C of the CLI would have cancelled it; its stream then carries the end.
func (s *Server) handoffCancel(w http.ResponseWriter, r *http.Request) {
	if !s.handoffs.cancel(r.PathValue("handle")) {
		writeErr(w, http.StatusNotFound, "not_found", "no hand-off in flight by that handle")
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"cancelled": true})
}

// Handoffs is how many hand-offs this server took (the tests' proof that one was).
func (s *Server) Handoffs() int64 { return s.handoffCount.Load() }
