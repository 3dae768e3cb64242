package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/catalog/view"
	"github.com/agora-dev/agora/internal/compute/local"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/egress"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/runtimebin"
)

// Dispatcher builds the dispatcher over AGORA_HOME with the local provider.
func (f *Factory) Dispatcher(ctx context.Context) (*dispatch.Dispatcher, error) {
	h, sealer, err := f.sealedHome(ctx)
	if err != nil {
		return nil, err
	}
	bin, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find the agora binary to bind into the sandbox: %w", err)
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
		Records: dispatch.NewRecords(h.DB, audit.New(f.Now), f.Now),
		Catalog: reader,
		Blobs:   h.Blobs,
		Unseal: func(ctx context.Context, ref string) ([]byte, error) {
			sealed, err := reader.Sealed(ctx, ref)
			if err != nil {
				return nil, err
			}
			return sealer.Open(ref, sealed)
		},
		Provider: provider,
		// Docker and kubernetes targets: built on first use, one per target.
		Providers: newRemoteProviders(h.Dir).For,
		Config:    h.Config,
		StateDir:  filepath.Join(h.Dir, home.DispatchDir),
		AgoraBin:  bin,
		// The gateways of model runtimes dial through this policy (egress.allow_private).
		Egress:      egress.Policy{AllowPrivate: prefixes},
		EgressRoots: roots,
		// Versions and digests of the host's agent CLIs, cached by file identity, so a
		// dispatch does not rehash a 400 MB claude each time.
		Runtimes: &runtimebin.Resolver{CacheFile: filepath.Join(h.Dir, runtimebin.CacheFileName)},
		Now:      f.Now,
		Tracer:   tracer,
	}, nil
}

// Courier builds the callback courier.
func (f *Factory) Courier(ctx context.Context) (*dispatch.Courier, error) {
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
