package orch

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/audit/verify"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/api"
)

// orchRunExporter exports a sealed run's part of orch.db after a fresh checkpoint, so the
// bundle's proofs reach its last entry: serve's answer to `agora orch audit`, and the run
// page's verification.
func orchRunExporter(orchCP *audit.Checkpointer) func(ctx context.Context, runID string) (*verify.Bundle, error) {
	return func(ctx context.Context, runID string) (*verify.Bundle, error) {
		if _, err := orchCP.Checkpoint(ctx); err != nil {
			return nil, err
		}
		return orchCP.Export(ctx, audit.Selection{Subjects: []string{entry.Run(runID)}, Run: runID})
	}
}

// runParts names a run and its attempts for [audit.Checkpointer.ExportRun].
func runParts(run api.Run, orchPart *verify.Bundle) audit.RunParts {
	parts := audit.RunParts{Run: verify.RunInfo{ID: run.ID, Name: run.Name, PlanDigest: run.PlanDigest}, Orch: orchPart}
	for _, t := range run.Tasks {
		parts.Tasks = append(parts.Tasks, audit.RunTask{ID: t.ID, Dispatches: t.Dispatches})
	}
	return parts
}

// runVerifier exports a sealed run's bundle as `agora orch audit` writes it and checks it as
// `agora verify --key keys/audit.pub` does, for the web run page. The web view hands it a run
// without its tasks: it reads them with reader (the view's read-only connection).
func runVerifier(h *home.Home, orchCP, mainCP *audit.Checkpointer, now func() time.Time, reader *orch.Reader) func(context.Context, api.Run) (*verify.Report, error) {
	export := orchRunExporter(orchCP)
	return func(ctx context.Context, run api.Run) (*verify.Report, error) {
		if len(run.Tasks) == 0 {
			tasks, err := reader.AllAttempts(ctx, run.ID)
			if err != nil {
				return nil, err
			}
			for _, t := range tasks {
				run.Tasks = append(run.Tasks, api.Task{ID: t.ID, Dispatches: t.Dispatches})
			}
		}
		orchPart, err := export(ctx, run.ID)
		if err != nil {
			return nil, err
		}
		rb, err := mainCP.ExportRun(ctx, runParts(run, orchPart), dispatch.NewRecords(h.DB, nil, now))
		if err != nil {
			return nil, err
		}
		// Through the file format and back: what is checked is what a written bundle holds.
		var buf bytes.Buffer
		if err := verify.WriteRunBundle(&buf, rb); err != nil {
			return nil, err
		}
		parsed, err := verify.ParseRunBundle(&buf)
		if err != nil {
			return nil, fmt.Errorf("read back the run bundle: %w", err)
		}
		// The key checkpointerFor read from keys/audit.pub, as `--key keys/audit.pub` passes it.
		return verify.VerifyRun(parsed, verify.Options{Key: strings.TrimSpace(mainCP.Key())}), nil
	}
}
