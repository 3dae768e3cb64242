package web

import (
	"context"
	"github.com/agora-dev/agora/internal/compute/warm"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/verify"
	"github.com/agora-dev/agora/internal/budget"
	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/digest"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/api"
)

// Orch is the engine as the run view sees it: a feed of changes, and the three commands a
// person may give. *orch.Engine implements it. What the runs are is read through [Runs],
// never through the engine.
type Orch interface {
	Subscribe(id string) (<-chan api.Event, func())
	Cancel(ctx context.Context, req api.ActionRequest) error
	Answer(ctx context.Context, req api.ActionRequest) error
	Retry(ctx context.Context, req api.ActionRequest) error
}

// Runs reads orch.db's committed runs in bounded pieces: *orch.Reader over a read-only
// connection of orch.db's own, so a page never holds a connection the engine needs.
type Runs interface {
	Runs(ctx context.Context, limit int) ([]api.Run, error)
	Run(ctx context.Context, ref string) (api.Run, error)
	Shape(ctx context.Context, id string) (orch.RunShape, error)
	Counts(ctx context.Context, id string) (map[string]int, int, error)
	Usage(ctx context.Context, id string) (*budget.Usage, error)
	Tasks(ctx context.Context, id string, from, limit int) ([]orch.TaskRow, error)
	TasksAt(ctx context.Context, id string, idx []int) ([]orch.TaskRow, error)
	TasksIn(ctx context.Context, id, state string, limit int) ([]orch.TaskRow, error)
	TasksNamed(ctx context.Context, id string, ids []string) ([]orch.TaskRow, error)
	Task(ctx context.Context, id, taskID string) (orch.TaskRow, error)
	Attempts(ctx context.Context, id string, idx int) ([]string, error)
	AttemptsIn(ctx context.Context, id string, from, to int) (map[int][]string, error)
	AttemptRuns(ctx context.Context, dispatchIDs []string) (map[string]string, error)
}

// Dispatches are the dispatch records. *dispatch.Records implements it.
type Dispatches interface {
	Get(ctx context.Context, id string) (*dispatch.Record, error)
	List(ctx context.Context, f dispatch.ListFilter) ([]*dispatch.Record, error)
	DecideApproval(ctx context.Context, id, call string, approve bool, reason, actor, argsDigest string) (*dispatch.Approval, error)
	// LearnInRun returns the ids of a run's learn dispatches (one query): the run page marks
	// a task whose dispatch was one, a target's mode: learn included (docs/learn.md).
	LearnInRun(ctx context.Context, runID string) (map[string]bool, error)
}

// Sources are the rest of what the pages read. Every field but Orch, Runs and Dispatches may
// be nil: the page then says the part is not available. Everything read SHOULD come through
// connections of the view's own (read-only), never the pools the engine and the dispatcher
// write through.
type Sources struct {
	Orch       Orch
	Runs       Runs
	Dispatches Dispatches
	// Blob reads a stored blob, hash-checked, refusing one over max bytes (0: no cap).
	Blob func(d digest.Digest, max int64) ([]byte, error)
	// Live reads a running dispatch's phase and the ends of its live stdout and stderr
	// (*dispatch.Dispatcher's Live).
	Live func(id string) dispatch.Live
	// Catalog lists the catalog's versions of one kind (metadata only).
	Catalog func(ctx context.Context, kind catalog.Kind) ([]catalog.Version, error)
	// MainLog is agora.db's audit log (dispatches, tool calls, network, catalog); OrchLog is
	// orch.db's (runs and tasks).
	MainLog audit.Querier
	OrchLog audit.Querier
	// CancelDispatch cancels a dispatch on behalf of actor, who is audited as asking
	// (*dispatch.Dispatcher's CancelBy). The view offers it only for dispatches not in a run:
	// a run's attempts are cancelled through the engine, which decides what follows.
	CancelDispatch func(ctx context.Context, id, actor string) (*dispatch.Record, error)
	// VerifyRun exports a sealed run's bundle and verifies it as `agora verify --key` with
	// the home's audit key would. The run page shows the result, kept per run (verifycache.go).
	VerifyRun func(ctx context.Context, run api.Run) (*verify.Report, error)
	// Queues lists agora.yaml's queues with their running tasks and depth (*orch.Engine's
	// Queues): the runs page lists them, a run's page shows its own.
	Queues func(ctx context.Context) ([]api.Queue, error)
	// Warm returns the warm slots serve holds, per target (its standby supervisors);
	// the runs page shows a line per warm target. Nil when serve holds none.
	Warm func() []warm.Counts
}
