package worker

import (
	"cmp"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/runtime/agentrun"
	"github.com/agora-dev/agora/internal/runtime/runtimes"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// The model's final answer is the one thing of a dispatch that no process of the agent can
// write: it reaches the worker from the model (the openai loop runs in the worker, which is
// not dumpable) or over the pipe of a CLI that is not dumpable either, stays in the worker's
// memory, and is written to out/outputs/final.md only after the stop step, when no process
// of the agent is left. result.json declares it (Result.Final) with the hash of the bytes the
// worker held, and only when every link of that chain held; a review is read from there and
// nowhere else (docs/adr/0001-a-review-is-the-reviewers-final-answer.md).

// answerChannel says whether the runtime's final answer will reach the worker over a channel
// no process of the agent can write, and why not when it will not. It runs just before the
// runtime starts: what it checks is what the runtime then runs.
func (r *runner) answerChannel() (sealed bool, why string) {
	rt, ok := runtimes.Lookup(r.man.Runtime)
	switch {
	case !ok || rt.Model.API == "":
		return false, "an exec command has no model answer"
	case !rt.Hosted():
		return true, "" // the loop runs in the worker
	}
	p := runtimeBinaryPath(r.man)
	if p == "" {
		return false, "the " + rt.Name + " CLI comes from the sandbox's PATH, a file its tools can read"
	}
	if err := cliSealed(p); err != nil {
		return false, "the " + rt.Name + " CLI " + err.Error()
	}
	return true, ""
}

// modelRuntime reports whether the dispatch runs a model runtime (openai, claude-code,
// codex), whose answer and question come from its model alone, never from a file in out/.
func (r *runner) modelRuntime() bool {
	rt, ok := runtimes.Lookup(r.man.Runtime)
	return ok && rt.Model.API != ""
}

// cliSealed checks that the CLI at p will run non-dumpable, so that no other process of its
// uid can ptrace it or open its /proc/PID/fd/1 (the pipe the worker reads its events from):
// the kernel makes a process that executes a file its user cannot read non-dumpable, for
// good. So p must be a regular file the worker (the CLI's uid, with no capabilities) cannot
// open for reading, and must stay so: owned by another user (no process here may chmod it)
// or on a read-only mount. The host binds such a file on a local sandbox (an execute-only
// copy, runtimebin.ExecOnly); a docker or kubernetes target, or a CLI a capability ships,
// runs a readable one.
func cliSealed(p string) error {
	fi, err := os.Lstat(p)
	if err != nil {
		return fmt.Errorf("at %s cannot be checked: %w", p, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("at %s is not a regular file", p)
	}
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err == nil {
		f.Close()
		return fmt.Errorf("runs from %s, which its user can read, so it is dumpable: its tools could write its output", p)
	}
	if !errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("at %s cannot be checked: %w", p, err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return nil
	}
	var sfs unix.Statfs_t
	if err := unix.Statfs(p, &sfs); err == nil && sfs.Flags&unix.ST_RDONLY != 0 {
		return nil
	}
	return fmt.Errorf("runs from %s, which its own user owns on a writable mount and could make readable", p)
}

// reclaimOut gives the worker back what the agent may have taken from it in out/: the agent
// runs as the worker's user, so it can chmod out/ and out/outputs/ read-only (a planted
// answer could not be replaced, nor result.json written). The worker owns both and adds its
// own read, write and search bits back; it runs after the stop step, when nothing of the
// agent can take them again. outputs/ must be a directory if it is there at all.
func (r *runner) reclaimOut() *failure {
	if err := reclaimDir(r.out); err != nil {
		return fail(lifecycle.ReasonWorkerFailed, "take back out/: %v", err)
	}
	return nil
}

// reclaimDir adds the owner's rwx to the directory at p (never through a symlink).
func reclaimDir(p string) error {
	fi, err := os.Lstat(p)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", path.Base(p))
	}
	if fi.Mode().Perm()&0o700 == 0o700 {
		return nil
	}
	return os.Chmod(p, fi.Mode().Perm()|0o700)
}

// keepAnswer writes what a model runtime produced into out/: the final answer as
// outputs/final.md (an output like any other, and Result.Final when the channel it came
// through is sealed) and a question as needs_input.json (the needs_input phase reads it as it
// reads an exec agent's). It runs after the stop step. Each is written as a new file renamed
// over whatever the agent left at that name (a file it made read-only, a symlink, a FIFO, a
// directory), through an [os.Root] on out/; an outputs/ that is a symlink or not a directory
// fails the dispatch. Whatever fails, nothing the agent planted is ever declared: the hash
// declared is that of the bytes the worker held.
func (r *runner) keepAnswer(exit agentrun.Exit) *failure {
	if exit.Final == nil && exit.Question == "" {
		return nil
	}
	root, err := os.OpenRoot(r.out)
	if err != nil {
		return fail(lifecycle.ReasonWorkerFailed, "keep the answer: %v", err)
	}
	defer root.Close()
	if exit.Final != nil {
		if err := outputsDir(root); err != nil {
			return fail(lifecycle.ReasonWorkerFailed, "keep the answer: %v", err)
		}
		b := []byte(*exit.Final)
		if weakenAnswer {
			// selftest's control test's worker only (weaken_on.go): absent from a shipped one.
			if planted, err := root.ReadFile(wire.FinalPath); err == nil {
				b = planted
				if r.opts.Stderr != nil {
					fmt.Fprintf(r.opts.Stderr, "agora worker: built with -tags agora_weaken: vouching for the %s the agent left\n", wire.FinalPath)
				}
			}
		}
		if err := replaceIn(root, wire.FinalPath, b); err != nil {
			return fail(lifecycle.ReasonWorkerFailed, "keep the answer: %v", err)
		}
		why := r.answerWhy
		if r.answerSealed && !r.stopped {
			why = "no stop step ended the agent's processes (no PID namespace of its own), so one could still change what is declared"
		}
		if r.answerSealed && r.stopped {
			sum := sha256.Sum256(b)
			r.res.Final = &wire.FileInfo{Path: wire.FinalPath, Size: int64(len(b)), SHA256: hex.EncodeToString(sum[:])}
		} else if r.opts.Stderr != nil {
			fmt.Fprintf(r.opts.Stderr, "agora worker: the answer is kept as %s but not vouched for as the model's own (so it cannot be a review): %s\n", wire.FinalPath, why)
		}
	}
	if exit.Question != "" {
		b, err := json.Marshal(wire.NeedsInput{Question: agentrun.Truncate(exit.Question, wire.MaxQuestion)})
		if err != nil {
			return fail(lifecycle.ReasonWorkerFailed, "keep the question: %v", err)
		}
		if err := replaceIn(root, wire.NeedsInputFile, b); err != nil {
			return fail(lifecycle.ReasonWorkerFailed, "keep the question: %v", err)
		}
	}
	return nil
}

// outputsDir makes sure out/outputs is a directory the worker can write: made when missing,
// its owner bits given back when the agent took them; a symlink or anything else there is
// refused, never followed or removed.
func outputsDir(root *os.Root) error {
	fi, err := root.Lstat(wire.OutputsDir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return root.Mkdir(wire.OutputsDir, 0o755)
	case err != nil:
		return err
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("out/%s is a symlink; the worker writes the model's answer there", wire.OutputsDir)
	case !fi.IsDir():
		return fmt.Errorf("out/%s is not a directory; the worker writes the model's answer there", wire.OutputsDir)
	case fi.Mode().Perm()&0o700 != 0o700:
		return root.Chmod(wire.OutputsDir, fi.Mode().Perm()|0o700)
	}
	return nil
}

// replaceIn writes b to name under root as a new file (0644) renamed over whatever is there,
// so nothing there is written through or kept. A directory in the way is removed first.
func replaceIn(root *os.Root, name string, b []byte) error {
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := path.Join(path.Dir(name), "."+path.Base(name)+".tmp-"+hex.EncodeToString(rnd[:]))
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, werr := f.Write(b)
	if err := errors.Join(werr, f.Chmod(0o644), f.Close()); err != nil {
		root.Remove(tmp)
		return err
	}
	if err := root.Rename(tmp, name); err != nil {
		// A directory in the way (the agent's) cannot be renamed over.
		if rmErr := root.RemoveAll(name); rmErr != nil {
			root.Remove(tmp)
			return errors.Join(err, rmErr)
		}
		if err := root.Rename(tmp, name); err != nil {
			root.Remove(tmp)
			return err
		}
	}
	return nil
}

// userPrompt is the model runtimes' first user message: the input's "prompt" when it is a
// string, else the whole input JSON. When the dispatch resumes one that asked a question, the
// question and its answer follow the prompt (they are in the input JSON anyway).
func userPrompt(inputJSON string) string {
	inputJSON = cmp.Or(inputJSON, "{}")
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
		return fail(lifecycle.ReasonWorkerFailed, "transcript: %v", err)
	}
	sum := sha256.Sum256(b)
	r.res.Transcript = &wire.FileInfo{Path: wire.TranscriptFile, Size: int64(len(b)), SHA256: hex.EncodeToString(sum[:])}
	return nil
}
