package agentrun

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/agora-dev/agora/internal/worker/wire"
)

// Transcript is the model runtimes' transcript: whole lines, up to [wire.MaxTranscript]
// bytes; later lines are dropped, never failing the loop. Writes are serialised (claude's
// events and the worker's may interleave). It is kept in the worker's memory, which nothing
// of the agent can reach (the worker is not dumpable), and written to out/transcript.jsonl
// only after the stop step, with the hash the worker declares: a tool that replaced the file
// during the run could otherwise have its own file stored as the record of the run.
type Transcript struct {
	mu      sync.Mutex
	buf     bytes.Buffer // guarded by mu
	used    bool         // guarded by mu: a runtime opened it
	dropped int64        // guarded by mu: bytes not kept
}

// OpenTranscript hands a runtime the dispatch's transcript.
func (inv Invocation) OpenTranscript() (*Transcript, error) {
	if inv.Transcript == nil {
		// A runtime run on its own (its tests): a transcript nobody keeps.
		return &Transcript{used: true}, nil
	}
	inv.Transcript.mu.Lock()
	inv.Transcript.used = true
	inv.Transcript.mu.Unlock()
	return inv.Transcript, nil
}

// Write keeps p whole, or drops it past the limit.
func (t *Transcript) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if int64(t.buf.Len()+len(p)) > wire.MaxTranscript {
		t.dropped += int64(len(p))
		return len(p), nil
	}
	t.buf.Write(p)
	return len(p), nil
}

// close says on w how much was dropped, if anything.
func (t *Transcript) Close(w io.Writer) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.dropped > 0 {
		fmt.Fprintf(w, "agora worker: transcript: %d bytes dropped past the %d byte limit\n", t.dropped, wire.MaxTranscript)
	}
}

// EnvWith returns env with each of set's keys replaced (or added).
func EnvWith(env []string, set map[string]string) []string {
	out := make([]string, 0, len(env)+len(set))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := set[k]; !ok {
			out = append(out, kv)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(set)) {
		out = append(out, k+"="+set[k])
	}
	return out
}

// Kept returns the transcript's bytes and whether a runtime opened it; the worker writes
// them to out/transcript.jsonl after the stop step (the worker's answer.go, keepTranscript). The bytes
// are the transcript's own: nothing writes to it any more by then.
func (t *Transcript) Kept() ([]byte, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.buf.Bytes(), t.used
}
