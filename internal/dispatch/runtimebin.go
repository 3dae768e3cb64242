package dispatch

import (
	"context"
	"errors"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/runtime/runtimes"
	"github.com/agora-dev/agora/internal/runtimebin"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// runtimeBinary resolves the host-installed CLI of the dispatch's runtime: the binary
// agora.yaml names (runtimes.NAME.binary) or, when none is named, the one on agora's PATH.
// It returns nil, and no failure, for a runtime with no CLI, and for an unconfigured one
// found nowhere on the host: the sandbox then looks the program up on its own PATH (a
// capability that ships claude keeps working). A configured binary that cannot be used fails
// the dispatch: a person named it, so running something else would not be what they set.
func (d *Dispatcher) runtimeBinary(ctx context.Context, runtime, sandbox string) (*wire.RuntimeBinary, *Outcome) {
	if rt, _ := runtimes.Lookup(runtime); !rt.Hosted() {
		return nil, nil
	}
	configured := ""
	if d.Config != nil {
		configured = d.Config.RuntimeBinary(runtime)
	}
	res := d.Runtimes
	if res == nil {
		res = defaultRuntimes
	}
	b, err := res.Resolve(ctx, runtime, configured)
	var nf *runtimebin.NotFoundError
	if errors.As(err, &nf) && configured == "" {
		return nil, nil
	}
	if err != nil {
		o := failed(lifecycle.ReasonProviderFailed, "%v", err)
		return nil, &o
	}
	rb := &wire.RuntimeBinary{Path: b.SandboxPath(), HostPath: b.Path, Version: b.Version, SHA256: b.SHA256}
	if sandbox == compute.SandboxNone {
		rb.Path = b.Path // no mount namespace: the worker runs the host's file
	}
	if err := rb.Validate(); err != nil {
		o := failed(lifecycle.ReasonProviderFailed, "%s runtime: %v", runtime, err)
		return nil, &o
	}
	return rb, nil
}

// defaultRuntimes resolves for a Dispatcher with no Runtimes: no cache across processes.
var defaultRuntimes = &runtimebin.Resolver{}

// runtimeBinaryBinds binds rb read-only at its sandbox path: for a local target's sandbox, an
// execute-only copy of the host's file (runtimebin.ExecOnly, in d.RuntimeCopies), so that the
// CLI runs non-dumpable and the agent's tools, which run as its uid, can neither read its
// environment (the relay token) nor write its output pipe nor ptrace it; else
// the host's file itself. The record keeps the host's path and digest: the copy has its bytes.
func (d *Dispatcher) runtimeBinaryBinds(rb *wire.RuntimeBinary, target config.Target, sandbox string) ([]compute.Bind, error) {
	if rb == nil {
		return nil, nil
	}
	src := rb.HostPath
	local := target.Provider == "" || target.Provider == config.ProviderLocal
	if local && sandbox != compute.SandboxNone && d.RuntimeCopies != "" {
		var err error
		if src, err = runtimebin.ExecOnly(d.RuntimeCopies, rb.HostPath, rb.SHA256); err != nil {
			return nil, err
		}
	}
	return []compute.Bind{{Src: src, Dst: rb.Path}}, nil
}

// SetRuntimeBinary records the host CLI a live dispatch's sandbox runs, before it starts.
func (s *Records) SetRuntimeBinary(ctx context.Context, id string, rb *wire.RuntimeBinary) error {
	return s.SetBinaries(ctx, id, rb, nil, "")
}
