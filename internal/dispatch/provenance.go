package dispatch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/agora-dev/agora/internal/jcs"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// ProvenanceFormat names the provenance statement's format.
const ProvenanceFormat = "agora-dispatch-manifest/v1"

// Provenance is the canonical statement of what a dispatch ran on and produced: the pinned
// catalog hashes, its input and upstream inputs, and the refs of its products. Its digest is
// recorded in the dispatch's terminal audit entry (details.manifest), so an exported bundle
// can carry the manifest and a verifier can bind it to the log (docs/audit-bundle.md). It is
// a pure function of the record, so an exporter rebuilds the exact bytes later.
func Provenance(r *Record) ([]byte, error) {
	envs := make([]any, len(r.Envs))
	for i, e := range r.Envs {
		envs[i] = e.Name + "@" + string(e.Digest)
	}
	inputs := make([]any, len(r.Inputs))
	for i, in := range r.Inputs {
		files := make([]any, len(in.Files))
		for j, f := range in.Files {
			files[j] = map[string]any{"path": f.Path, "digest": string(f.Digest), "size": f.Size}
		}
		m := map[string]any{"key": in.Key, "select": in.Select, "from_dispatch": in.FromDispatch, "files": files}
		if in.Dir != "" {
			// Only when set, so the manifests of dispatches without one keep their bytes.
			m["dir"] = in.Dir
		}
		if in.Apply {
			m["apply"] = true
		}
		if in.Stack {
			m["stack"] = true // only when set, as dir and apply
		}
		inputs[i] = m
	}
	products := map[string]any{"patch": "", "outputs": []any{}}
	if r.Result != nil {
		if r.Result.Patch != nil {
			products["patch"] = string(r.Result.Patch.Digest)
		}
		outs := make([]any, len(r.Result.Outputs))
		for i, o := range r.Result.Outputs {
			outs[i] = map[string]any{"path": o.Path, "digest": string(o.Digest), "size": o.Size}
		}
		products["outputs"] = outs
		if f := r.Result.Final; f != nil {
			// Only when the worker vouched for a final answer (the one a review is read from),
			// so the statements of other dispatches keep their bytes.
			products["final"] = string(f.Digest)
		}
	}
	stmt := map[string]any{
		"format":       ProvenanceFormat,
		"dispatch":     r.ID,
		"subagent":     r.Subagent + "@" + string(r.SubagentDigest),
		"envs":         envs,
		"target":       r.Target,
		"sandbox":      r.Sandbox,
		"network":      r.Network,
		"input_digest": string(r.InputDigest),
		"repo":         r.Repo,
		"revision":     r.Revision,
		"inputs":       inputs,
		"state":        endState(r.State),
		"reason":       r.Reason,
		"products":     products,
	}
	if v := r.Verdict; v != nil {
		// Only with a verdict, so the statements of older dispatches keep their bytes.
		stmt["verdict"] = v.Digest()
	}
	if rb := r.RuntimeBinary; rb != nil {
		// Only when there is one, so the statements of older dispatches keep their bytes.
		stmt["runtime_binary"] = map[string]any{"path": rb.Path, "host_path": rb.HostPath, "version": rb.Version, "sha256": rb.SHA256}
	}
	if wb := r.WorkerBinary; wb != nil {
		// Only when there is one, so the statements of older dispatches keep their bytes.
		stmt["worker_binary"] = map[string]any{"path": wb.Path, "host_path": wb.HostPath, "version": wb.Version, "sha256": wb.SHA256}
	}
	if r.WorkerImage != "" {
		// A pod's worker: the digest-pinned image it came from. Only when set, as above.
		stmt["worker_image"] = r.WorkerImage
	}
	if r.StackBase != "" {
		// Where a stacked dispatch started (revision plus its stack inputs). Only when set.
		stmt["stack_base"] = r.StackBase
	}
	b, err := jcs.Marshal(stmt)
	if err != nil {
		return nil, fmt.Errorf("dispatch %s manifest: %w", r.ID, err)
	}
	return b, nil
}

// endState is the state a dispatch ended in: an answered dispatch ended needs_input (its
// terminal entry says so, and the manifest it names was written then).
func endState(state string) string {
	if state == lifecycle.DispatchAnswered {
		return lifecycle.DispatchNeedsInput
	}
	return state
}

// ProvenanceDigest is "sha256:<hex>" of b.
func ProvenanceDigest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// EndedProvenance returns the provenance statement of dispatch id, refusing one that has not
// ended: a run bundle holds closed attempts only, and a verifier fails an attempt with no
// terminal entry as it would one whose end was cut. It is the [audit.EndedDispatches] of a run
// bundle.
func (s *Records) EndedProvenance(ctx context.Context, id string) ([]byte, error) {
	r, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if !lifecycle.DispatchEnded(r.State) {
		return nil, fmt.Errorf("dispatch %s is still %s; a run bundle holds only ended dispatches, export it once this one ends", id, r.State)
	}
	return Provenance(r)
}
