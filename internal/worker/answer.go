package worker

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"

	"github.com/agora-dev/agora/internal/runtime/agentrun"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// keepAnswer writes what an in-process runtime produced into out/: the final answer as
// outputs/final.md (an output like any other) and a question as needs_input.json (the
// needs_input phase reads it as it reads an exec agent's). Both go through an [os.Root] on
// out/, so a symlink the agent planted there cannot send them elsewhere.
func (r *runner) keepAnswer(exit agentrun.Exit) *failure {
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
		b, err := json.Marshal(wire.NeedsInput{Question: agentrun.Truncate(exit.Question, wire.MaxQuestion)})
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

// keepTranscript writes the transcript a runtime kept to out/transcript.jsonl (replacing
// whatever is there, never through a link) and declares its hash. It runs after stop.
func (r *runner) keepTranscript() *failure {
	t := r.transcript
	if t == nil {
		return nil
	}
	b, used := t.Kept()
	if !used {
		return nil
	}
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
