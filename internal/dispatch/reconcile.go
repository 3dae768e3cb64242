package dispatch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/sandboxfs"
	"github.com/agora-dev/agora/internal/secret/redact"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// reconcileInput is what reconcile judges: the sandbox's end as the host saw it, and where
// the worker left its result.
type reconcileInput struct {
	r              *Record
	st             *stage
	exit           compute.Exit
	werr           error      // the provider's own failure to wait, if any
	trip           *limitTrip // a host-side limit that stopped the sandbox
	red            *redact.Redactor
	stdout, stderr *logSink // closed: their truncation is final
	transcript     bool     // a model runtime: keep the transcript the worker vouched for
	// restaged: the stage was made again by the replica that took over (adopt.go): a
	// worker that left no result here may have uploaded it to the old leader's disk.
	restaged bool
}

// reconcile turns the provider's exit and the worker's result.json into one outcome, storing
// the patch, outputs and logs as redacted blobs. The host's own observations (cancel,
// timeout, a tripped limit, exit status) win over anything the worker wrote: the worker
// shares its sandbox with the agent, so result.json is evidence, not authority.
//
// Everything is read through package sandboxfs (no symlink anywhere on the path, regular
// files with one link, capped), and what the worker declared a hash for is stored only when
// the bytes still have that hash: a mismatch, or a declared file that is missing or refused,
// fails the dispatch integrity-failed. Every string the agent could shape (output names, the
// question, details) is redacted before it is stored.
func (d *Dispatcher) reconcile(ctx context.Context, in reconcileInput) Outcome {
	r, st, exit, werr, trip, red := in.r, in.st, in.exit, in.werr, in.trip, in.red
	stdout, stderr, transcript := in.stdout, in.stderr, in.transcript
	res := &Result{Outputs: []Output{}}
	o := Outcome{Isolation: exit.Isolation, Result: res}
	if logs, err := sandboxfs.Open(st.dir); err == nil {
		// The logs are the host's own files (the supervisor wrote them, capped and redacted
		// as they streamed); they are read the same way all the same.
		if a, err := d.storeFile(logs, stdoutLog, MaxStdout, nil, ""); err == nil {
			res.Stdout = a
		}
		if a, err := d.storeFile(logs, stderrLog, MaxStderr, nil, ""); err == nil {
			res.Stderr = a
		}
		logs.Close()
	}
	if stdout.truncated {
		res.Truncated = append(res.Truncated, "stdout")
	}
	if stderr.truncated {
		res.Truncated = append(res.Truncated, "stderr")
	}

	out, rerr := sandboxfs.Open(st.out)
	var wr wire.Result
	if rerr == nil {
		defer out.Close()
		wr, rerr = readResult(out)
	}
	if rerr == nil && exit.Code != 0 {
		// The agent shares the out directory and could plant a result; only a worker that
		// exited 0 vouches for it.
		rerr = fmt.Errorf("worker exited %d", exit.Code)
	}
	var ierr error
	if transcript && rerr == nil && wr.Transcript != nil {
		// The worker kept the transcript in its own memory and wrote it after the stop
		// step; it is stored only with the hash the worker declared. A transcript the
		// worker did not vouch for (it died, or was killed) is not kept: the agent could
		// have written it.
		a, err := d.storeFile(out, wire.TranscriptFile, wire.MaxTranscript, red, wr.Transcript.SHA256)
		if err != nil {
			ierr = fmt.Errorf("transcript: %w", err)
		} else {
			res.Transcript = a
		}
	}
	if rerr == nil && ierr == nil && wr.Final != nil {
		// The model's final answer, which the worker held in its own memory and wrote after
		// the stop step: kept only with the hash the worker declared (ParseResult checked
		// its path, outputs/final.md).
		a, err := d.storeFile(out, wr.Final.Path, wire.MaxOutputsSize, red, wr.Final.SHA256)
		if err != nil {
			ierr = fmt.Errorf("final answer: %w", err)
		} else {
			res.Final = a
		}
	}
	if rerr == nil && ierr == nil {
		ierr = d.storeWorkerProducts(out, wr, red, res)
	}
	switch {
	case werr != nil:
		o.State, o.Reason, o.Detail = lifecycle.DispatchFailed, lifecycle.ReasonProviderFailed, werr.Error()
	case trip.Detail() != "":
		o.State, o.Reason, o.Detail = lifecycle.DispatchFailed, trip.Reason(), trip.Detail()
	case exit.Cancelled || d.Records.cancelRequested(ctx, r.ID):
		o.State, o.Reason, o.Detail = lifecycle.DispatchCancelled, lifecycle.ReasonCancelled, "cancelled"
	case exit.TimedOut:
		o.State, o.Reason, o.Detail = lifecycle.DispatchFailed, lifecycle.ReasonTimeout, fmt.Sprintf("killed after %s", time.Duration(r.Timeout))
	case exit.Lost:
		// A Job or container deleted behind agora's back: nothing it left is vouched for.
		*res = Result{Outputs: []Output{}, Stdout: res.Stdout, Stderr: res.Stderr, Truncated: res.Truncated, Phases: res.Phases}
		o.State, o.Reason, o.Detail = lifecycle.DispatchFailed, lifecycle.ReasonLost, "the worker vanished before it ended (its Job or container was removed)"
	case errors.As(ierr, new(storeError)):
		o.State, o.Reason, o.Detail = lifecycle.DispatchFailed, lifecycle.ReasonProviderFailed, ierr.Error()
	case ierr != nil:
		// What the worker declared is not what is there: nothing it produced is kept.
		*res = Result{Outputs: []Output{}, Stdout: res.Stdout, Stderr: res.Stderr, Truncated: res.Truncated, Phases: res.Phases}
		o.State, o.Reason = lifecycle.DispatchFailed, lifecycle.ReasonIntegrityFailed
		o.Detail = "the out directory does not hold what the worker declared: " + ierr.Error()
	case rerr != nil && in.restaged:
		// Adopted after a takeover: the worker's result went to the replica that led
		// before, whose disk this one does not have, or its inputs were there when it fetched
		// them. Lost, so the plan runs it again, never a failure of the agent's.
		o.State, o.Reason = lifecycle.DispatchFailed, lifecycle.ReasonLost
		o.Detail = "adopted after a takeover, the worker left no result on this replica (it uploaded it to the replica that led before, or could not fetch its inputs from there): " + rerr.Error()
	case rerr != nil && exit.GatewayUnreachable:
		// The worker said so by its exit status, which the agent cannot set: no result
		// crossed, and the agent is not to blame.
		code := exit.Code
		o.ExitCode = &code
		o.State, o.Reason = lifecycle.DispatchFailed, lifecycle.ReasonGatewayUnreachable
		o.Detail = "the worker could not reach agora's network gateway across its retries (the gateway was down or refused it); no result came back. See the dispatch's stderr"
	case rerr != nil:
		code := exit.Code
		o.ExitCode = &code
		o.State, o.Reason = lifecycle.DispatchFailed, lifecycle.ReasonWorkerFailed
		o.Detail = fmt.Sprintf("worker exited %d without a usable result: %v", exit.Code, rerr)
		if exit.Signal != "" {
			o.Detail = fmt.Sprintf("worker killed (%s) without a usable result", exit.Signal)
		}
	default:
		code := wr.ExitCode
		o.ExitCode = &code
		o.Detail = wr.Detail
		switch wr.Status {
		case wire.StatusOK:
			o.State = lifecycle.DispatchFinished
		case wire.StatusNeedsInput:
			o.State = lifecycle.DispatchNeedsInput
		default:
			o.State, o.Reason = lifecycle.DispatchFailed, string(wr.Reason)
			o.Reason = cmp.Or(o.Reason, lifecycle.ReasonWorkerFailed)
		}
	}
	// A detail can quote what the agent wrote (a file name, a parse error): redact it.
	o.Detail = red.String(o.Detail)
	return o
}

// Files of the stage directory the supervisor itself writes.
const (
	stdoutLog = "stdout.log"
	stderrLog = "stderr.log"
)

func readResult(out *sandboxfs.Dir) (wire.Result, error) {
	b, err := out.ReadFile(wire.ResultFile, wire.MaxResultSize)
	if err != nil {
		return wire.Result{}, err
	}
	return wire.ParseResult(b)
}

// storeWorkerProducts keeps the patch, the outputs and the needs_input question, redacted,
// each only with the hash the worker declared. It returns the first integrity failure.
func (d *Dispatcher) storeWorkerProducts(out *sandboxfs.Dir, wr wire.Result, red *redact.Redactor, res *Result) error {
	for _, ph := range wr.Phases {
		res.Phases = append(res.Phases, Phase{Name: ph.Name, OK: ph.OK, MS: ph.MS})
	}
	if p := wr.Patch; p != nil {
		a, err := d.storeFile(out, wire.PatchFile, wire.MaxPatchSize, red, p.SHA256)
		if err != nil {
			return fmt.Errorf("patch: %w", err)
		}
		res.Patch = a
	}
	var total int64
	for _, o := range wr.Outputs {
		// ParseResult has checked each path: outputs/<clean relative path>, printable.
		total += o.Size
		if total > wire.MaxOutputsSize {
			return fmt.Errorf("outputs: more than %d bytes declared", wire.MaxOutputsSize)
		}
		a, err := d.storeFile(out, o.Path, wire.MaxOutputsSize, red, o.SHA256)
		if err != nil {
			return fmt.Errorf("output: %w", err)
		}
		// The name is the agent's choice: a secret in it is masked like one in the content.
		name := red.String(strings.TrimPrefix(o.Path, wire.OutputsDir+"/"))
		res.Outputs = append(res.Outputs, Output{Path: name, Digest: a.Digest, Size: a.Size})
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
	return nil
}

// storeFile stores dir/rel as a blob, redacted when red is non-nil. With wantSHA256 set, the
// raw bytes must hash to it (sandboxfs.ErrIntegrity otherwise).
func (d *Dispatcher) storeFile(dir *sandboxfs.Dir, rel string, limit int64, red *redact.Redactor, wantSHA256 string) (*Artifact, error) {
	var b []byte
	var err error
	if wantSHA256 != "" {
		b, err = dir.ReadVerified(rel, limit, wantSHA256)
	} else {
		b, err = dir.ReadFile(rel, limit)
	}
	if err != nil {
		return nil, err
	}
	if red != nil {
		b = red.Bytes(b)
	}
	dg, err := d.Blobs.Put(b)
	if err != nil {
		return nil, storeError{fmt.Errorf("store %s: %w", rel, err)}
	}
	return &Artifact{Digest: dg, Size: int64(len(b))}, nil
}

// storeError is a blob the host could not write: its own failure, not the worker's.
type storeError struct{ error }

func (e storeError) Unwrap() error { return e.error }
