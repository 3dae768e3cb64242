package worker

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"
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
		return fail(ReasonWorkerFailed, "keep the answer: %v", err)
	}
	defer root.Close()
	if exit.Final != nil {
		if err := root.MkdirAll(OutputsDir, 0o755); err != nil {
			return fail(ReasonWorkerFailed, "keep the answer: %v", err)
		}
		name := path.Join(OutputsDir, FinalFile)
		_ = root.Remove(name) // replaced, never written through
		if err := root.WriteFile(name, []byte(*exit.Final), 0o644); err != nil {
			return fail(ReasonWorkerFailed, "keep the answer: %v", err)
		}
	}
	if exit.Question != "" {
		b, err := json.Marshal(NeedsInput{Question: truncate(exit.Question, MaxQuestion)})
		if err != nil {
			return fail(ReasonWorkerFailed, "keep the question: %v", err)
		}
		_ = root.Remove(NeedsInputFile)
		if err := root.WriteFile(NeedsInputFile, b, 0o644); err != nil {
			return fail(ReasonWorkerFailed, "keep the question: %v", err)
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

// transcriptFile is out/transcript.jsonl as the model runtimes write it: whole lines, up to
// [MaxTranscript] bytes; later lines are dropped, never failing the loop. Writes are
// serialised (claude's events and the worker's may interleave).
type transcriptFile struct {
	mu      sync.Mutex
	f       *os.File
	left    int64 // guarded by mu
	dropped int64 // guarded by mu: bytes not written
}

// openTranscript creates out/transcript.jsonl, replacing whatever is there (never through a
// symlink).
func openTranscript(out string) (*transcriptFile, error) {
	p := out + "/" + TranscriptFile
	_ = os.Remove(p)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open transcript: %w", err)
	}
	return &transcriptFile{f: f, left: MaxTranscript}, nil
}

func (t *transcriptFile) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if int64(len(p)) > t.left || t.f == nil {
		t.dropped += int64(len(p))
		return len(p), nil
	}
	n, err := t.f.Write(p)
	t.left -= int64(n)
	if err != nil {
		// A transcript that cannot be written is lost, not the dispatch.
		t.dropped += int64(len(p) - n)
		t.f.Close()
		t.f = nil
	}
	return len(p), nil
}

// close closes the file and says on w how much was dropped, if anything.
func (t *transcriptFile) close(w io.Writer) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.f != nil {
		t.f.Close()
		t.f = nil
	}
	if t.dropped > 0 {
		fmt.Fprintf(w, "agora worker: transcript: %d bytes dropped past the %d byte limit\n", t.dropped, MaxTranscript)
	}
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
