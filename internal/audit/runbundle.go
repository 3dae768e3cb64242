package audit

import (
	"context"
	"fmt"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/audit/verify"
)

// RunParts is what the orchestrator gives a run bundle: the sealed run, the dispatches each
// of its tasks fired, and its part of orch.db, exported by the orchestrator service.
type RunParts struct {
	Run   verify.RunInfo
	Tasks []RunTask
	Orch  *verify.Bundle
}

// RunTask names the dispatches one task of a run fired, in the order it fired them.
type RunTask struct {
	ID         string
	Dispatches []string
}

// EndedDispatches gives the provenance statement of each dispatch a run bundle binds.
type EndedDispatches interface {
	// EndedProvenance returns the provenance statement of dispatch id, the manifest whose
	// digest its terminal entry records. A dispatch that has not ended MUST be an error that
	// names its state: a run bundle holds closed attempts only.
	EndedProvenance(ctx context.Context, id string) ([]byte, error)
}

// ExportRun checkpoints this log and builds the bundle of one run: run's part of orch.db and
// this log's entries of every dispatch the run fired (subjects dispatch/<id>, the selection
// naming the run), with each dispatch's manifest in task order. A run that fired no dispatch
// has nothing to bind its entries to and is refused.
func (c *Checkpointer) ExportRun(ctx context.Context, run RunParts, dispatches EndedDispatches) (*verify.RunBundle, error) {
	if _, err := c.Checkpoint(ctx); err != nil {
		return nil, err
	}
	var subjects []string
	manifests := []verify.Manifest{}
	for _, t := range run.Tasks {
		for _, id := range t.Dispatches {
			subjects = append(subjects, entry.Dispatch(id))
			m, err := dispatches.EndedProvenance(ctx, id)
			if err != nil {
				return nil, fmt.Errorf("task %s: %w", t.ID, err)
			}
			manifests = append(manifests, verify.Manifest{Manifest: m})
		}
	}
	if len(subjects) == 0 {
		return nil, fmt.Errorf("run %s fired no dispatch; there is nothing to bind its entries to", run.Run.ID)
	}
	part, err := c.Export(ctx, Selection{Subjects: subjects, Run: run.Run.ID})
	if err != nil {
		return nil, err
	}
	part.Manifests = manifests
	return &verify.RunBundle{Format: verify.RunFormat, Run: run.Run, Orch: run.Orch, Dispatches: part}, nil
}
