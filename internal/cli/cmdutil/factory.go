package cmdutil

import (
	"context"
	"fmt"
	"log/slog"
	"os/user"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/agoradb"
	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/anchor"
	"github.com/agora-dev/agora/internal/catalog/provision"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/dispatch/detach"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/client"
	"github.com/agora-dev/agora/internal/secret"
	"github.com/agora-dev/agora/internal/store"
	"github.com/agora-dev/agora/internal/tracing"
)

// Factory supplies commands with their streams and lazily opened dependencies, so a command
// that fails flag validation touches nothing on disk.
type Factory struct {
	IO     *IOStreams
	Getenv func(string) string
	Now    func() time.Time

	// ActorFlag is --actor as given, empty when it was not: [Factory.Actor] is who the audit
	// log records.
	ActorFlag string
	// Wrote is set once a command opened something that appends audit entries:
	// [Factory.AfterWrites] then checkpoints.
	Wrote bool

	home *home.Home
	// tracer is the process's tracer, made on first use ([Factory.Tracer]).
	tracer *tracing.Tracer

	// What only the composition root (internal/cli's NewFactory) can build: it knows every
	// provider, anchor and replica a home may configure, which no command needs to.

	// Checkpointer is agora.db's audit checkpointer with the anchors of agora.yaml. Commands
	// that append entries call MaybeCheckpoint on it after they commit ([Factory.AfterWrites]).
	Checkpointer func(context.Context) (*audit.Checkpointer, error)
	// Dispatcher is the dispatcher over AGORA_HOME with its providers.
	Dispatcher func(context.Context) (*dispatch.Dispatcher, error)
	// Courier is the callback courier.
	Courier func(context.Context) (*dispatch.Courier, error)
	// OrchClient connects to the orchestrator service of AGORA_HOME.
	OrchClient func(context.Context) (*client.Client, error)
	// NetworkGateway prepares the network gateway on listen, certified for advertise's host
	// (each "": agora.yaml's gateway:), and returns what serves it until its context ends:
	// agora gateway serve and agora orch serve --gateway run it.
	NetworkGateway func(ctx context.Context, listen, advertise string) (func(context.Context) error, error)
	// HomeDuties starts what a server other than agora orch serve owes h while it runs (agora
	// mcp): agora.db replicated to replicate.s3 and retention's sweep, both only without
	// leader: in agora.yaml. stop ends them and returns once replication shipped the last
	// changes.
	HomeDuties func(ctx context.Context, h *home.Home, log *slog.Logger) (stop func(), err error)
	// S3Anchors are the s3 anchors cfg's audit.anchors names for the audit log logName
	// ("agora.db", "orch.db"), in their order: agora restore checks what it brought back
	// against their newest checkpoints.
	S3Anchors func(cfg *config.Config, logName string) ([]*anchor.S3, error)
	// LogCheckpointer is the checkpointer of the audit log in db, named logName ("orch.db")
	// in its origin, with the anchors of agora.yaml: agora orch serve checkpoints orch.db with it.
	LogCheckpointer func(ctx context.Context, db *store.DB, logName string) (*audit.Checkpointer, error)
	// ServeReplication starts replicating agora.db and the orch.db at orchDB when agora.yaml
	// has replicate.s3, until ctx ends: agora orch serve's replicas. metrics is nil without
	// replicate.s3; wait, after ctx ends, ships the last changes and returns.
	ServeReplication func(ctx context.Context, h *home.Home, log *slog.Logger, orchDB string) (metrics prometheus.Collector, wait func(), err error)
	// AgoraReplicated is the orchestrator's wait for agora.db's replica
	// (dispatchexec.Executor.Replicated); it returns nil when h does not replicate.
	AgoraReplicated func(h *home.Home) func(context.Context, time.Time) error
	// Handoff is agora orch serve's runner of the dispatches `agora dispatch run` hands it,
	// over serve's dispatcher d and supervisors sup: it runs them as the dispatch noun does.
	Handoff func(d *dispatch.Dispatcher, sup *detach.Supervisors, h *home.Home) (api.Handoff, error)
}

// NewFactory returns a factory over the given streams and environment, without the
// composition root's builders (nil): internal/cli's NewFactory sets them for a process, and a
// test of one command that needs none builds its factory here.
func NewFactory(io *IOStreams, getenv func(string) string) *Factory {
	return &Factory{IO: io, Getenv: getenv, Now: time.Now}
}

// HomeDir is AGORA_HOME.
func (f *Factory) HomeDir() (string, error) { return config.HomeDir(f.Getenv) }

// Home opens AGORA_HOME, which must be initialised: only 'agora init' creates a home
// ([GateHomes]), so a mistyped AGORA_HOME is refused naming the path.
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

// SealedHome opens AGORA_HOME and its sealer for a command that may write: the catalog
// writer and the dispatcher both need the two, and both count as writes for the checkpoint.
func (f *Factory) SealedHome(ctx context.Context) (*home.Home, *secret.Sealer, error) {
	f.Wrote = true
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
	h, sealer, err := f.SealedHome(ctx)
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
	if f.ActorFlag != "" {
		return f.ActorFlag
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if u := f.Getenv("USER"); u != "" {
		return u
	}
	return "unknown"
}

// AfterWrites writes an audit checkpoint when one is due (every N entries or T seconds, see
// agora.yaml audit:) after a command that may have appended entries. Short-lived processes
// are how most entries arrive, so they carry the checkpoint duty; a failure is a warning,
// never the command's failure: the entries themselves are committed.
func (f *Factory) AfterWrites(ctx context.Context) {
	if !f.Wrote || f.home == nil || f.Checkpointer == nil {
		return
	}
	cp, err := f.Checkpointer(ctx)
	if err == nil {
		_, err = cp.MaybeCheckpoint(ctx)
	}
	if err != nil {
		fmt.Fprintf(f.IO.ErrOut, "agora: warning: audit checkpoint: %v\n", err)
	}
}

// AddActorFlag adds --actor, the name [Factory.Actor] records, to root's persistent flags.
func (f *Factory) AddActorFlag(root *cobra.Command) {
	root.PersistentFlags().StringVar(&f.ActorFlag, "actor", "",
		"who is making this change, recorded in the audit log as given (default: the OS user; CI sets it)")
}

// Close releases whatever the factory opened.
func (f *Factory) Close() error {
	if f.home != nil {
		return f.home.Close()
	}
	return nil
}
