package orch_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/retention"
)

// TestEngine_RunPurgedUnderALiveEngine: a sealed run the engine ran is
// purged from orch.db while the engine runs. The engine then answers its status and actions
// with "purged by retention", and the same plan submitted again is a new run that runs to
// the end: the engine held nothing of the purged run that its later commits touch.
func TestEngine_RunPurgedUnderALiveEngine(t *testing.T) {
	h := start(t, "", newFakeExec(succeed))
	p := mkPlan(t, "nightly", 2, spec{ID: "a"}, spec{ID: "b", Deps: []string{"a"}})
	id := h.runToEnd(p)
	if r := h.wait(id); r.State != lifecycle.RunSucceeded || !r.Sealed {
		t.Fatalf("run %s sealed=%v", r.State, r.Sealed)
	}
	ctx := context.Background()
	const age = 180 * 24 * time.Hour
	later := time.Now().Add(age + 24*time.Hour)
	// Retention purges no run a waiting row log record names: the engine folds
	// a sealed run's records at once, but after the status that said it sealed.
	h.waitFolded()
	items, _, err := retention.PlanRuns(ctx, h.db.SQL(), age, later)
	if err != nil || len(items) != 1 || items[0].Run != id || items[0].Tasks != 2 {
		t.Fatalf("planned %+v, %v", items, err)
	}
	var res retention.Result
	if err := retention.PurgeRuns(ctx, h.db, audit.New(nil).SparseTree(), items, age, later, "ops", retention.RoleOperator, &res); err != nil || res.Runs != 1 {
		t.Fatalf("purge: %+v, %v", res, err)
	}

	_, err = h.eng.Status(ctx, id)
	if !errors.Is(err, orch.ErrNotFound) || !strings.Contains(err.Error(), "purged by retention") || !strings.Contains(err.Error(), "by ops") {
		t.Fatalf("status of the purged run: %v", err)
	}
	if err := h.eng.Seal(ctx, api.ActionRequest{Run: id}); !errors.Is(err, orch.ErrNotFound) || !strings.Contains(err.Error(), "purged by retention") {
		t.Fatalf("seal of the purged run: %v", err)
	}
	again, created, err := h.eng.Submit(ctx, p, orch.Checkout{}, "tester")
	if err != nil || !created || again == id {
		t.Fatalf("the same plan again: %s created=%v, %v; want a new run", again, created, err)
	}
	if r := h.wait(again); r.State != lifecycle.RunSucceeded || !r.Sealed {
		t.Fatalf("the new run %s sealed=%v", r.State, r.Sealed)
	}
}
