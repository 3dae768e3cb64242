package cli

import (
	"context"
	"os/user"
	"time"

	"github.com/agora-dev/agora/internal/agoradb"
	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/catalog/provision"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/secret"
	"github.com/agora-dev/agora/internal/tracing"
)

// Factory supplies commands with their streams and lazily opened dependencies, so a command
// that fails flag validation touches nothing on disk.
type Factory struct {
	IO     *IOStreams
	Getenv func(string) string
	Now    func() time.Time

	actorFlag string
	home      *home.Home
	// wrote is set once a command opened something that appends audit entries.
	wrote bool
	// tracer is the process's tracer, made on first use (tracing.go).
	tracer *tracing.Tracer
}

// NewFactory returns a factory over the given streams and environment.
func NewFactory(io *IOStreams, getenv func(string) string) *Factory {
	return &Factory{IO: io, Getenv: getenv, Now: time.Now}
}

// HomeDir is AGORA_HOME.
func (f *Factory) HomeDir() (string, error) { return config.HomeDir(f.Getenv) }

// Home opens AGORA_HOME, which must be initialised: only 'agora init' creates a home
// (homecheck.go), so a mistyped AGORA_HOME is refused naming the path.
func (f *Factory) Home(ctx context.Context) (*home.Home, error) {
	if f.home != nil {
		return f.home, nil
	}
	dir, err := f.HomeDir()
	if err != nil {
		return nil, err
	}
	h, err := home.OpenExisting(ctx, dir, agoradb.Migrations())
	if err != nil {
		return nil, err
	}
	f.home = h
	return h, nil
}

// sealedHome opens AGORA_HOME and its sealer for a command that may write: the catalog
// writer and the dispatcher both need the two, and both count as writes for the checkpoint.
func (f *Factory) sealedHome(ctx context.Context) (*home.Home, *secret.Sealer, error) {
	f.wrote = true
	h, err := f.Home(ctx)
	if err != nil {
		return nil, nil, err
	}
	sealer, err := h.Sealer()
	if err != nil {
		return nil, nil, err
	}
	return h, sealer, nil
}

// Writer opens the privileged catalog writer.
func (f *Factory) Writer(ctx context.Context) (*provision.Writer, error) {
	h, sealer, err := f.sealedHome(ctx)
	if err != nil {
		return nil, err
	}
	return provision.New(h.DB, h.Blobs, sealer, audit.New(f.Now), provision.Options{
		CapabilityMaxSize: int64(h.Config.Catalog.CapabilityMaxSize),
		Now:               f.Now,
	}), nil
}

// Actor is who the audit log records for changes: --actor as given, else the OS user.
func (f *Factory) Actor() string {
	if f.actorFlag != "" {
		return f.actorFlag
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if u := f.Getenv("USER"); u != "" {
		return u
	}
	return "unknown"
}

// Close releases whatever the factory opened.
func (f *Factory) Close() error {
	if f.home != nil {
		return f.home.Close()
	}
	return nil
}
