package wire

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"unicode"

	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/strictjson"
)

// ResultVersion is the format version of result.json.
const ResultVersion = 1

// Limits of result.json and of what it describes.
const (
	// MaxResultSize caps result.json.
	MaxResultSize = 4 << 20
	// MaxDetail caps Result.Detail.
	MaxDetail = 4 << 10
	// MaxPatchSize caps patch.diff.
	MaxPatchSize = 64 << 20
	// MaxOutputs caps the number of files listed under outputs/.
	MaxOutputs = 256
	// MaxOutputsSize caps the total size of the files listed under outputs/.
	MaxOutputsSize = 100 << 20
	// MaxOutputNames caps the total length of the output paths. Each name is listed in the
	// record, in the dispatch's manifest and in every audit bundle of its run; without it an
	// agent could leave 256 names of 4 KiB each and push its run's manifest past what
	// `agora verify` reads (1 MiB), making the run's audit unverifiable for good.
	MaxOutputNames = 64 << 10
	// MaxSkipped caps Result.OutputsSkipped.
	MaxSkipped = 256
	// MaxOutputPath caps the length of one output path.
	MaxOutputPath = 4096
)

// Status is how a dispatch ended, as the worker saw it. A failed or needs_input result ends
// the dispatch in the state of the same name.
type Status string

const (
	// StatusOK: the agent exited 0, its patch and outputs are captured.
	StatusOK Status = "ok"
	// StatusFailed: see Result.Reason and Result.Detail.
	StatusFailed Status = lifecycle.DispatchFailed
	// StatusNeedsInput: the agent asked a question (Result.NeedsInput); the patch so far is
	// captured.
	StatusNeedsInput Status = lifecycle.DispatchNeedsInput
)

// Reason is why a dispatch failed: one of [lifecycle.WorkerReasons], the reasons the worker
// decides. The host decides the others (provider-failed, cancelled, ...); they never appear
// in result.json.
type Reason string

// ReasonNone is the reason of a result that did not fail.
const ReasonNone Reason = ""

var statuses = []Status{StatusOK, StatusFailed, StatusNeedsInput}

// Phase names, in the order the worker runs them. A result lists the phases that ran, in
// this order. A failed phase before the runtime is the last one listed; from the runtime on
// the worker goes on after a failure, so a failed runtime is followed by capture.
const (
	PhaseVerify     = "verify"
	PhaseSecrets    = "secrets"
	PhaseNetwork    = "network"
	PhaseOverlay    = "overlay"
	PhaseSetup      = "setup"
	PhaseBaseline   = "baseline"
	PhaseRuntime    = "runtime"
	PhaseStop       = "stop"
	PhaseNeedsInput = "needs_input"
	PhaseCapture    = "capture"
	PhaseOutputs    = "outputs"
)

var phaseOrder = []string{PhaseVerify, PhaseSecrets, PhaseNetwork, PhaseOverlay, PhaseSetup, PhaseBaseline,
	PhaseRuntime, PhaseStop, PhaseNeedsInput, PhaseCapture, PhaseOutputs}

// Result is out/result.json, the worker's one authoritative account of the dispatch. The
// worker writes it last, atomically. The host MUST trust it only when the worker process
// exited 0 (the agent shares the directory and could plant one) and read it with
// [ParseResult]. Detail, output paths and the question come from or are shaped by the
// agent: the host MUST redact them like the agent's output before storing or showing them.
type Result struct {
	Version int    `json:"version"`
	Status  Status `json:"status"`
	Reason  Reason `json:"reason"`
	Detail  string `json:"detail"`
	// ExitCode is the agent's exit status (-1 when killed by a signal, 0 when it never ran).
	ExitCode int     `json:"exit_code"`
	Phases   []Phase `json:"phases"`
	// Patch describes out/patch.diff; nil when capture did not run or failed.
	Patch   *PatchInfo   `json:"patch,omitempty"`
	Outputs []OutputInfo `json:"outputs"`
	// OutputsSkipped lists entries of outputs/ that are not regular files (not followed).
	OutputsSkipped []SkippedOutput `json:"outputs_skipped"`
	NeedsInput     *NeedsInput     `json:"needs_input,omitempty"`
	// Transcript describes out/transcript.jsonl (model runtimes); nil when there is none.
	Transcript *FileInfo `json:"transcript,omitempty"`
	// Final describes out/outputs/final.md when the worker vouches that it holds the model's
	// final answer exactly as the worker received it, over a channel no process of the agent
	// could write: the openai loop in the worker, or the event stream of a CLI (claude-code,
	// codex) that ran non-dumpable from a file nobody in the sandbox can read or change. The
	// worker wrote it after the stop step (no process of the agent left) and hashed the bytes
	// it held, not the file. nil for an exec agent, a run without an answer, and wherever the
	// worker cannot vouch for the channel (a readable CLI, no stop step). A review is read from
	// here and nowhere else (docs/adr/0001-a-review-is-the-reviewers-final-answer.md).
	Final *FileInfo `json:"final,omitempty"`
}

// FinalPath is Result.Final's path, relative to out/.
const FinalPath = OutputsDir + "/" + FinalFile

// FileInfo describes one file of out/ the worker vouches for.
type FileInfo struct {
	Path   string `json:"path"` // relative to out/
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Phase is one timed step of the worker.
type Phase struct {
	Name string `json:"name"`
	OK   bool   `json:"ok"`
	MS   int64  `json:"ms"`
}

// PatchInfo describes out/patch.diff: a binary-safe `git diff` against the baseline, which
// `git apply` accepts on the dispatched revision.
type PatchInfo struct {
	Path         string `json:"path"` // always "patch.diff", relative to out/
	SHA256       string `json:"sha256"`
	Bytes        int64  `json:"bytes"`
	FilesChanged int    `json:"files_changed"`
}

// OutputInfo describes one regular file under out/outputs/.
type OutputInfo struct {
	Path   string `json:"path"` // "outputs/...", relative to out/
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// SkippedOutput is an entry under out/outputs/ that was not collected.
type SkippedOutput struct {
	Path string `json:"path"` // "outputs/...", the rest quoted (Go syntax, ASCII) when unprintable
	Why  string `json:"why"`  // "symlink", "not a regular file", "unprintable name"
}

// ParseResult reads result.json strictly: size-capped, unknown fields and duplicate keys
// refused, statuses and reasons from their closed sets, then [Result.Validate].
func ParseResult(b []byte) (Result, error) {
	var r Result
	if err := strictjson.Decode("result", b, MaxResultSize, &r); err != nil {
		return Result{}, err
	}
	if err := r.Validate(); err != nil {
		return Result{}, err
	}
	return r, nil
}

// Marshal checks r and returns its JSON.
func (r Result) Marshal() ([]byte, error) {
	r.Phases = nonNil(r.Phases)
	r.Outputs = nonNil(r.Outputs)
	r.OutputsSkipped = nonNil(r.OutputsSkipped)
	if err := r.Validate(); err != nil {
		return nil, err
	}
	var b []byte
	if r.NeedsInput == nil {
		b = appendResult(make([]byte, 0, 1024), &r)
	} else {
		var err error
		if b, err = json.Marshal(r); err != nil {
			return nil, err
		}
	}
	if len(b) > MaxResultSize {
		return nil, fmt.Errorf("result: %d bytes, over the %d byte limit", len(b), MaxResultSize)
	}
	return b, nil
}

// Validate checks that r is consistent: its status, reason and needs_input agree, its
// phases are known and in order, and every size is within its limit.
func (r Result) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if r.Version != ResultVersion {
		bad("version: unsupported version %d", r.Version)
	}
	if !slices.Contains(statuses, r.Status) {
		bad("status: unknown status %q", r.Status)
	}
	if r.Reason != ReasonNone && !slices.Contains(lifecycle.WorkerReasons(), string(r.Reason)) {
		bad("reason: unknown reason %q", r.Reason)
	}
	switch r.Status {
	case StatusOK:
		if r.Reason != ReasonNone || r.ExitCode != 0 {
			bad("status ok: want no reason and exit code 0, got %q and %d", r.Reason, r.ExitCode)
		}
	case StatusFailed:
		if r.Reason == ReasonNone {
			bad("status failed: no reason")
		}
	case StatusNeedsInput:
		if r.Reason != ReasonNone {
			bad("status needs_input: want no reason, got %q", r.Reason)
		}
		if r.NeedsInput == nil {
			bad("status needs_input: no needs_input")
		}
	}
	if r.NeedsInput != nil {
		if r.Status != StatusNeedsInput {
			bad("needs_input: present with status %q", r.Status)
		}
		if err := r.NeedsInput.Validate(); err != nil {
			bad("needs_input: %v", err)
		}
	}
	if len(r.Detail) > MaxDetail {
		bad("detail: %d bytes, over the %d byte limit", len(r.Detail), MaxDetail)
	}
	last := -1
	for i, p := range r.Phases {
		at := slices.Index(phaseOrder, p.Name)
		switch {
		case at < 0:
			bad("phases[%d]: unknown phase %q", i, p.Name)
		case at <= last:
			bad("phases[%d]: %q out of order or repeated", i, p.Name)
		}
		last = max(last, at)
		if p.MS < 0 {
			bad("phases[%d]: negative duration", i)
		}
	}
	if p := r.Patch; p != nil {
		if p.Path != PatchFile {
			bad("patch.path: want %q, got %q", PatchFile, p.Path)
		}
		if !isHexSHA256(p.SHA256) {
			bad("patch.sha256: want 64 lowercase hex digits")
		}
		if p.Bytes < 0 || p.Bytes > MaxPatchSize {
			bad("patch.bytes: want 0-%d, got %d", MaxPatchSize, p.Bytes)
		}
		if p.FilesChanged < 0 || int64(p.FilesChanged) > p.Bytes {
			bad("patch.files_changed: %d is impossible for %d bytes", p.FilesChanged, p.Bytes)
		}
	}
	if t := r.Transcript; t != nil {
		if t.Path != TranscriptFile {
			bad("transcript.path: want %q, got %q", TranscriptFile, t.Path)
		}
		if t.Size < 0 || t.Size > MaxTranscript {
			bad("transcript.size: want 0-%d, got %d", MaxTranscript, t.Size)
		}
		if !isHexSHA256(t.SHA256) {
			bad("transcript.sha256: want 64 lowercase hex digits")
		}
	}
	if f := r.Final; f != nil {
		if f.Path != FinalPath {
			bad("final.path: want %q, got %q", FinalPath, f.Path)
		}
		if f.Size < 0 || f.Size > MaxOutputsSize {
			bad("final.size: want 0-%d, got %d", MaxOutputsSize, f.Size)
		}
		if !isHexSHA256(f.SHA256) {
			bad("final.sha256: want 64 lowercase hex digits")
		}
	}
	if len(r.Outputs) > MaxOutputs {
		bad("outputs: more than %d files", MaxOutputs)
	}
	var total int64
	names := 0
	for i, o := range r.Outputs {
		names += len(o.Path)
		if err := checkOutputPath(o.Path); err != nil {
			bad("outputs[%d]: %v", i, err)
		}
		if i > 0 && o.Path <= r.Outputs[i-1].Path {
			bad("outputs[%d]: %q out of order or repeated", i, o.Path)
		}
		if o.Size < 0 || o.Size > MaxOutputsSize {
			bad("outputs[%d]: size %d out of range", i, o.Size)
		}
		total += max(o.Size, 0)
		if !isHexSHA256(o.SHA256) {
			bad("outputs[%d]: sha256: want 64 lowercase hex digits", i)
		}
	}
	if total > MaxOutputsSize {
		bad("outputs: %d bytes in all, over the %d byte limit", total, MaxOutputsSize)
	}
	if names > MaxOutputNames {
		bad("outputs: names of %d bytes in all, over the %d byte limit", names, MaxOutputNames)
	}
	if len(r.OutputsSkipped) > MaxSkipped {
		bad("outputs_skipped: more than %d entries", MaxSkipped)
	}
	for i, s := range r.OutputsSkipped {
		if len(s.Path) > 4*MaxOutputPath || !strings.HasPrefix(s.Path, OutputsDir+"/") {
			bad("outputs_skipped[%d]: bad path", i)
		}
		if !slices.Contains(skipReasons, s.Why) {
			bad("outputs_skipped[%d]: unknown reason %q", i, s.Why)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("result: %w", errors.Join(errs...))
	}
	return nil
}

// Reasons an entry of outputs/ is skipped.
const (
	SkipSymlink     = "symlink"
	SkipNotRegular  = "not a regular file"
	SkipUnprintable = "unprintable name"
)

var skipReasons = []string{SkipSymlink, SkipNotRegular, SkipUnprintable}

// checkOutputPath accepts "outputs/<clean relative path>" of printable characters.
func checkOutputPath(p string) error {
	rest, ok := strings.CutPrefix(p, OutputsDir+"/")
	if !ok || rest == "" || len(p) > MaxOutputPath {
		return fmt.Errorf("path %q: want outputs/<file>", p)
	}
	if path.Clean(rest) != rest || rest == ".." || strings.HasPrefix(rest, "../") || strings.HasPrefix(rest, "/") {
		return fmt.Errorf("path %q is not clean", p)
	}
	if !Printable(rest) {
		return fmt.Errorf("path %q has unprintable characters", p)
	}
	return nil
}

// Printable reports whether s has no control characters and no replacement characters
// (so it survives JSON and terminals unchanged).
func Printable(s string) bool {
	for _, c := range s {
		if c == unicode.ReplacementChar || unicode.IsControl(c) || c == '\\' {
			return false
		}
	}
	return true
}

func isHexSHA256(s string) bool {
	if len(s) != 64 || strings.ToLower(s) != s {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}
