package dispatch

import (
	"github.com/agora-dev/agora/internal/capped"

	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/secret/redact"
	"github.com/agora-dev/agora/internal/worker"
)

// reconcile turns the provider's exit and the worker's result.json into one outcome, storing
// the patch, outputs and logs as redacted blobs. The host's own observations (cancel,
// timeout, exit status) win over anything the worker wrote: the worker shares its sandbox
// with the agent, so result.json is evidence, not authority.
func (d *Dispatcher) reconcile(ctx context.Context, r *Record, st *stage, exit compute.Exit, werr error,
	limit string, red *redact.Redactor, stdout, stderr *logSink, transcript bool) Outcome {
	res := &Result{Outputs: []Output{}}
	if transcript {
		// Kept whatever the outcome, redacted: it is how a failed loop is understood. Like
		// the logs it is the worker's account, not the host's.
		if a, err := d.storeFile(filepath.Join(st.out, worker.TranscriptFile), worker.MaxTranscript, red); err == nil {
			res.Transcript = a
		}
	}
	if a, err := d.storeFile(st.stdout, MaxStdout, nil); err == nil {
		res.Stdout = a
	}
	if a, err := d.storeFile(st.stderr, MaxStderr, nil); err == nil {
		res.Stderr = a
	}
	if stdout.truncated {
		res.Truncated = append(res.Truncated, "stdout")
	}
	if stderr.truncated {
		res.Truncated = append(res.Truncated, "stderr")
	}
	o := Outcome{Isolation: exit.Isolation, Result: res}

	wr, rerr := readResult(st.out)
	if rerr == nil && exit.Code != 0 {
		// The agent shares the out directory and could plant a result; only a worker that
		// exited 0 vouches for it.
		rerr = fmt.Errorf("worker exited %d", exit.Code)
	}
	if rerr == nil {
		d.storeWorkerProducts(st, wr, red, res)
	}
	switch {
	case werr != nil:
		o.State, o.Reason, o.Detail = StateFailed, ReasonProviderFailed, werr.Error()
	case limit != "":
		o.State, o.Reason, o.Detail = StateFailed, ReasonLimitExceeded, limit
	case exit.Cancelled || d.Records.cancelRequested(ctx, r.ID):
		o.State, o.Reason, o.Detail = StateCancelled, ReasonCancelled, "cancelled"
	case exit.TimedOut:
		o.State, o.Reason, o.Detail = StateFailed, ReasonTimeout, fmt.Sprintf("killed after %s", time.Duration(r.Timeout))
	case rerr != nil:
		code := exit.Code
		o.ExitCode = &code
		o.State, o.Reason = StateFailed, ReasonWorkerFailed
		o.Detail = fmt.Sprintf("worker exited %d without a usable result: %v", exit.Code, rerr)
		if exit.Signal != "" {
			o.Detail = fmt.Sprintf("worker killed (%s) without a usable result", exit.Signal)
		}
	default:
		code := wr.ExitCode
		o.ExitCode = &code
		o.Detail = red.String(wr.Detail)
		switch wr.Status {
		case worker.StatusOK:
			o.State = StateFinished
		case worker.StatusNeedsInput:
			o.State = StateNeedsInput
		default:
			o.State, o.Reason = StateFailed, string(wr.Reason)
			if o.Reason == "" {
				o.Reason = ReasonWorkerFailed
			}
		}
	}
	return o
}

func readResult(out string) (worker.Result, error) {
	b, err := capped.NoFollow(filepath.Join(out, "result.json"), maxResultFile)
	if err != nil {
		return worker.Result{}, err
	}
	return worker.ParseResult(b)
}

// storeWorkerProducts keeps the patch, the outputs and the needs_input question, redacted.
func (d *Dispatcher) storeWorkerProducts(st *stage, wr worker.Result, red *redact.Redactor, res *Result) {
	for _, ph := range wr.Phases {
		res.Phases = append(res.Phases, Phase{Name: ph.Name, OK: ph.OK, MS: ph.MS})
	}
	if wr.Patch != nil {
		if a, err := d.storeFile(filepath.Join(st.out, "patch.diff"), maxPatch, red); err == nil {
			res.Patch = a
		}
	}
	var total int64
	for _, o := range wr.Outputs {
		rel := filepath.Clean(o.Path)
		if !strings.HasPrefix(rel, "outputs/") || strings.Contains(rel, "..") {
			continue
		}
		total += o.Size
		if total > maxOutputsAll {
			break
		}
		if a, err := d.storeFile(filepath.Join(st.out, rel), maxOutputsAll, red); err == nil && o.SHA256 != "" {
			res.Outputs = append(res.Outputs, Output{Path: strings.TrimPrefix(rel, "outputs/"), Digest: a.Digest, Size: a.Size})
		}
	}
	if ni := wr.NeedsInput; ni != nil {
		n := &NeedsInput{Question: red.String(ni.Question)}
		for _, opt := range ni.Options {
			n.Options = append(n.Options, red.String(opt))
		}
		if len(ni.PartialState) > 0 {
			n.PartialState = red.Bytes(ni.PartialState)
		}
		res.NeedsInput = n
	}
}

// storeFile stores a regular file (never through a symlink) as a blob, redacted when red is
// non-nil.
func (d *Dispatcher) storeFile(path string, limit int64, red *redact.Redactor) (*Artifact, error) {
	b, err := capped.NoFollow(path, limit)
	if err != nil {
		return nil, err
	}
	if red != nil {
		b = red.Bytes(b)
	}
	dg, err := d.Blobs.Put(b)
	if err != nil {
		return nil, err
	}
	return &Artifact{Digest: dg, Size: int64(len(b))}, nil
}
