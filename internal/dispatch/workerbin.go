package dispatch

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/worker/wire"
	"github.com/agora-dev/agora/internal/workerbin"
)

// WorkerBinary is where the dispatcher finds the worker program (cmd/agora-worker) it binds
// into every sandbox, and how it pins it (package workerbin).
type WorkerBinary struct {
	// Path is the installed worker: workerbin.Locate's answer, beside the agora executable
	// unless agora.yaml's worker.binary names another file.
	Path string
	// Configured says agora.yaml named Path (for the fix the error gives).
	Configured bool
	// Exec is the exec-only worker (workerbin.ExecName) beside Path, or "". When the file is
	// there, an exec dispatch on a local target without warm slots binds it instead of Path:
	// it starts sooner. Path is pinned all the same, so a missing or unsound worker fails every
	// dispatch alike.
	Exec string
	// Pinner pins it into AGORA_HOME/bin; nil fails every dispatch that binds a worker.
	Pinner *workerbin.Pinner
}

// workerBinary pins the worker binary a dispatch on target binds, before anything starts: a
// missing worker, one built from other source or one that cannot be pinned fails the dispatch
// with the command that fixes it. It returns nil for a kubernetes target, whose pod runs the
// worker of its own image (pinned by digest in agora.yaml; the pod's fetch step checks its
// version against this agora's).
//
// execOnly says the exec-only worker may run the dispatch: an exec dispatch on a target
// without warm slots. It is bound on a local target when it is installed (d.Worker.Exec); a
// pod or a container runs the worker of its own.
func (d *Dispatcher) workerBinary(ctx context.Context, target config.Target, sandbox string, execOnly bool) (*wire.RuntimeBinary, *Outcome) {
	if target.Provider == config.ProviderKubernetes && sandbox != compute.SandboxNone {
		return nil, nil
	}
	if d.Worker.Pinner == nil || d.Worker.Path == "" {
		o := failed(lifecycle.ReasonProviderFailed, "this process has no worker binary to bind (agora-worker); install it beside agora with %s", workerbin.FixCommand)
		return nil, &o
	}
	b, err := d.Worker.Pinner.Pin(ctx, d.Worker.Path, d.Worker.Configured)
	if err == nil && execOnly && target.Provider == config.ProviderLocal && d.Worker.Exec != "" {
		// Only a file that is not there is passed over: one that is there is checked as the
		// worker is, and must be its owner's; one that fails the checks fails the dispatch.
		if workerbin.ExecThere(d.Worker.Exec) {
			b, err = d.Worker.Pinner.PinBeside(ctx, b, d.Worker.Exec)
		}
	}
	if err != nil {
		o := failed(lifecycle.ReasonProviderFailed, "%v", err)
		return nil, &o
	}
	wb := &wire.RuntimeBinary{Path: wire.BinPath, HostPath: b.Path, Version: b.Version, SHA256: b.SHA256}
	if sandbox == compute.SandboxNone {
		wb.Path = b.Path // no mount namespace: the worker runs the pinned copy where it is
	}
	if err := wb.Validate(); err != nil {
		o := failed(lifecycle.ReasonProviderFailed, "worker binary: %v", err)
		return nil, &o
	}
	return wb, nil
}

// workerBind binds the pinned worker read-only at wire.BinPath; none for a kubernetes target.
func workerBind(wb *wire.RuntimeBinary) []compute.Bind {
	if wb == nil {
		return nil
	}
	return []compute.Bind{{Src: wb.HostPath, Dst: wire.BinPath}}
}

// workerImage is the image a kubernetes target's pod runs its worker from (digest-pinned
// in agora.yaml): what the record says ran where [Dispatcher.workerBinary] binds nothing.
func workerImage(target config.Target, sandbox string) string {
	if target.Provider == config.ProviderKubernetes && sandbox != compute.SandboxNone {
		return target.WorkerImage
	}
	return ""
}

// SetBinaries records, in one transaction, the worker binary (or, for a pod, the worker
// image) and the host CLI a live dispatch's sandbox runs, before it starts; each may be empty.
func (s *Records) SetBinaries(ctx context.Context, id string, rb, wb *wire.RuntimeBinary, workerImage string) error {
	b := &binaries{runtime: rb, worker: wb, image: workerImage}
	if b.none() {
		return nil
	}
	return s.db.Tx(ctx, func(tx *sql.Tx) error { return setBinaries(ctx, tx, id, b) })
}

// binaries are what a dispatch's sandbox runs: the host CLI, the worker binary, the worker
// image. The supervisor records them before the sandbox runs anything: on their own
// (SetBinaries) before a cold start, or in the started transaction that a warm slot's claim
// commits before it releases the slot (one transaction fewer on the hand-off).
type binaries struct {
	runtime, worker *wire.RuntimeBinary
	image           string
}

func (b *binaries) none() bool {
	return b == nil || b.runtime == nil && b.worker == nil && b.image == ""
}

// setBinaries writes b into accepted dispatch id's record, inside tx.
func setBinaries(ctx context.Context, tx *sql.Tx, id string, b *binaries) error {
	if b.none() {
		return nil
	}
	cols := map[string]string{}
	for col, rb := range map[string]*wire.RuntimeBinary{"runtime_binary": b.runtime, "worker_binary": b.worker} {
		if rb == nil {
			continue
		}
		body, err := json.Marshal(rb)
		if err != nil {
			return err
		}
		cols[col] = string(body)
	}
	if b.image != "" {
		cols["worker_image"] = b.image
	}
	for _, col := range []string{"runtime_binary", "worker_binary", "worker_image"} {
		v, ok := cols[col]
		if !ok {
			continue
		}
		// col is one of the three literals above.
		res, err := tx.ExecContext(ctx, `UPDATE dispatches SET `+col+` = ? WHERE id = ? AND state = ?`, v, id, lifecycle.DispatchAccepted)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return fmt.Errorf("dispatch %s is no longer accepted; its %s is not recorded", id, col)
		}
	}
	return nil
}
