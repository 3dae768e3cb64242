package worker

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/agora-dev/agora/internal/worker/wire"
)

// keepAnswer writes what an in-process runtime produced into out/: the final answer as
// outputs/final.md (an output like any other) and a question as needs_input.json (the
// needs_input phase reads it as it reads an exec agent's). Both go through an [os.Root] on
// out/, so a symlink the agent planted there cannot send them elsewhere.
func (r *runner) keepAnswer(exit agentExit) *failure {
	if exit.Final == nil && exit.Question == "" {
		return nil
	}
	root, err := os.OpenRoot(r.out)
	if err != nil {
		return fail(wire.ReasonWorkerFailed, "keep the answer: %v", err)
	}
	defer root.Close()
	if exit.Final != nil {
		if err := root.MkdirAll(wire.OutputsDir, 0o755); err != nil {
			return fail(wire.ReasonWorkerFailed, "keep the answer: %v", err)
		}
		name := path.Join(wire.OutputsDir, wire.FinalFile)
		_ = root.Remove(name) // replaced, never written through
		if err := root.WriteFile(name, []byte(*exit.Final), 0o644); err != nil {
			return fail(wire.ReasonWorkerFailed, "keep the answer: %v", err)
		}
	}
	if exit.Question != "" {
		b, err := json.Marshal(wire.NeedsInput{Question: truncate(exit.Question, wire.MaxQuestion)})
		if err != nil {
			return fail(wire.ReasonWorkerFailed, "keep the question: %v", err)
		}
		_ = root.Remove(wire.NeedsInputFile)
		if err := root.WriteFile(wire.NeedsInputFile, b, 0o644); err != nil {
			return fail(wire.ReasonWorkerFailed, "keep the question: %v", err)
		}
	}
	return nil
}

// userPrompt is the model runtimes' first user message: the input's "prompt" when it is a
// string, else the whole input JSON. When the dispatch resumes one that asked a question, the
// question and its answer follow the prompt (they are in the input JSON anyway).
func userPrompt(inputJSON string) string {
	if inputJSON == "" {
		inputJSON = "{}"
	}
	var in struct {
		Prompt *string `json:"prompt"`
		Resume *struct {
			Question string `json:"question"`
			Answer   string `json:"answer"`
		} `json:"agora_resume"`
	}
	if json.Unmarshal([]byte(inputJSON), &in) != nil || in.Prompt == nil {
		return inputJSON
	}
	p := *in.Prompt
	if in.Resume != nil {
		p += fmt.Sprintf("\n\nYou asked a person: %s\nTheir answer: %s", in.Resume.Question, in.Resume.Answer)
	}
	return p
}

// transcriptFile is the model runtimes' transcript: whole lines, up to [wire.MaxTranscript]
// bytes; later lines are dropped, never failing the loop. Writes are serialised (claude's
// events and the worker's may interleave). It is kept in the worker's memory, which nothing
// of the agent can reach (the worker is not dumpable), and written to out/transcript.jsonl
// only after the stop step, with the hash the worker declares: a tool that replaced the file
// during the run could otherwise have its own file stored as the record of the run.
type transcriptFile struct {
	mu      sync.Mutex
	buf     bytes.Buffer // guarded by mu
	used    bool         // guarded by mu: a runtime opened it
	dropped int64        // guarded by mu: bytes not kept
}

// openTranscript hands a runtime the dispatch's transcript.
func (inv invocation) openTranscript() (*transcriptFile, error) {
	if inv.transcript == nil {
		// A runtime run on its own (its tests): a transcript nobody keeps.
		return &transcriptFile{used: true}, nil
	}
	inv.transcript.mu.Lock()
	inv.transcript.used = true
	inv.transcript.mu.Unlock()
	return inv.transcript, nil
}

func (t *transcriptFile) Write(p []byte) (int, error) {
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
func (t *transcriptFile) close(w io.Writer) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.dropped > 0 {
		fmt.Fprintf(w, "agora worker: transcript: %d bytes dropped past the %d byte limit\n", t.dropped, wire.MaxTranscript)
	}
}

// keepTranscript writes the transcript a runtime kept to out/transcript.jsonl (replacing
// whatever is there, never through a link) and declares its hash. It runs after stop.
func (r *runner) keepTranscript() *failure {
	t := r.transcript
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.used {
		return nil
	}
	b := t.buf.Bytes()
	if err := writeFileAtomic(r.out, wire.TranscriptFile, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	}); err != nil {
		return fail(wire.ReasonWorkerFailed, "transcript: %v", err)
	}
	sum := sha256.Sum256(b)
	r.res.Transcript = &wire.FileInfo{Path: wire.TranscriptFile, Size: int64(len(b)), SHA256: hex.EncodeToString(sum[:])}
	return nil
}

// envWith returns env with each of set's keys replaced (or added).
func envWith(env []string, set map[string]string) []string {
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
