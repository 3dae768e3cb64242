package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/catalog/view"
	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/compute/local"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/egress"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/runtimebin"
	"github.com/agora-dev/agora/internal/workerbin"
)

// dispatcher builds the dispatcher over AGORA_HOME with the local provider.
func dispatcher(ctx context.Context, f *cmdutil.Factory) (*dispatch.Dispatcher, error) {
	h, sealer, err := f.SealedHome(ctx)
	if err != nil {
		return nil, err
	}
	bin, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find the agora binary (detached supervisors run it): %w", err)
	}
	configured, err := h.Config.WorkerBinary(f.Getenv)
	if err != nil {
		return nil, err
	}
	worker, err := workerBinary(bin, configured, h.Dir)
	if err != nil {
		return nil, err
	}
	provider, err := local.New(local.Options{})
	if err != nil {
		return nil, err
	}
	prefixes, err := h.Config.Egress.Prefixes()
	if err != nil {
		return nil, err
	}
	roots, err := h.Config.Egress.LoadCACerts()
	if err != nil {
		return nil, err
	}
	tracer, err := f.Tracer(ctx)
	if err != nil {
		return nil, err
	}
	reader := view.New(h.DB, h.Blobs)
	return &dispatch.Dispatcher{
		Records: dispatch.NewRecords(h.DB, audit.New(f.Now).SparseTree(), f.Now),
		Catalog: reader,
		Blobs:   h.Blobs,
		Unseal: func(ctx context.Context, ref string) ([]byte, error) {
			sealed, err := reader.Sealed(ctx, ref)
			if err != nil {
				return nil, err
			}
			return sealer.Open(ref, sealed)
		},
		LocalProvider: provider,
		// Docker and kubernetes targets: built on first use, one per target.
		RemoteProviders: newRemoteProviders(h.Dir, h.DB, replicaWaits(h), keptUploads(h), worker.Path).For,
		Config:          h.Config,
		StateDir:        filepath.Join(h.Dir, home.DispatchDir),
		AgoraBin:        bin,
		Worker:          worker,
		// The gateways of model runtimes dial through this policy (egress.allow_private).
		Egress:      egress.Policy{AllowPrivate: prefixes},
		EgressRoots: roots,
		// Versions and digests of the host's agent CLIs, cached by file identity, so a
		// dispatch does not rehash a 400 MB claude each time.
		Runtimes: &runtimebin.Resolver{CacheFile: filepath.Join(h.Dir, runtimebin.CacheFileName)},
		// Local sandboxes run an execute-only copy of each, so the CLI is not dumpable.
		RuntimeCopies: filepath.Join(h.Dir, runtimebin.ExecOnlyDirName),
		Now:           f.Now,
		Tracer:        tracer,
	}, nil
}

// workerBinary is where the dispatcher finds the worker program: $AGORA_WORKER_BINARY or
// agora.yaml's worker.binary, else agora-worker beside this executable; pinned into AGORA_HOME/bin. Whether it is there
// and sound is checked per dispatch (and by agora doctor), so commands that start no
// sandbox work without it.
func workerBinary(exe, configured, homeDir string) (dispatch.WorkerBinary, error) {
	path, err := workerbin.Locate(exe, configured)
	if err != nil {
		return dispatch.WorkerBinary{}, err
	}
	return dispatch.WorkerBinary{
		Path: path, Configured: configured != "", Exec: workerbin.ExecBeside(path),
		Pinner: &workerbin.Pinner{Dir: filepath.Join(homeDir, workerbin.DirName)},
	}, nil
}

// courier builds the callback courier.
func courier(ctx context.Context, f *cmdutil.Factory) (*dispatch.Courier, error) {
	h, err := f.Home(ctx)
	if err != nil {
		return nil, err
	}
	key, err := h.CallbackKey()
	if err != nil {
		return nil, err
	}
	prefixes, err := h.Config.Egress.Prefixes()
	if err != nil {
		return nil, err
	}
	d := egress.NewDialer(egress.Policy{AllowPrivate: prefixes}, nil)
	return dispatch.NewCourier(h.DB.SQL(), key, d, f.Now), nil
}
