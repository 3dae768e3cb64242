package orch_test

import (
	"context"
	"errors"
	"testing"

	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/store"
)

// TestEngine_Fenced: the engine's group commit passes the process's leader fence
// (store.SetFence): with it refusing, a submission fails with the fence's error and orch.db
// holds no new run, nor any audit entry of it; the engine itself stops with that error (serve
// then exits: it never keeps serving without its lease).
func TestEngine_Fenced(t *testing.T) {
	h := start(t, "", newFakeExec(succeed))
	h.runToEnd(mkPlan(t, "before", 1, spec{ID: "a"}))
	runs, entries := h.count(t)
	fenced := errors.New("lease agora/leader: leadership ended; refusing to commit")
	restore := store.SetFence(func() error { return fenced })
	_, _, err := h.eng.Submit(context.Background(), mkPlan(t, "after", 1, spec{ID: "a"}), orch.Checkout{}, "tester")
	restore()
	if !errors.Is(err, fenced) {
		t.Fatalf("a fenced submission: %v, want the fence's error", err)
	}
	if r, e := h.count(t); r != runs || e != entries {
		t.Errorf("after a fenced submission: %d runs and %d audit entries, want %d and %d", r, e, runs, entries)
	}
	h.cancel()
	if err := <-h.done; !errors.Is(err, fenced) {
		t.Errorf("the engine stopped with %v, want the fence's error", err)
	}
	h.cancel = nil
	h.db.Close()
}

func (h *harness) count(t *testing.T) (runs, entries int) {
	t.Helper()
	if err := h.db.SQL().QueryRow(`SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM audit_entries)`).Scan(&runs, &entries); err != nil {
		t.Fatal(err)
	}
	return runs, entries
}

// TestEngine_StoppedSaysWhy: a command that comes after a fenced commit stopped the engine
// hears the fence's error, not a bare "engine stopped" (a caller, or a test racing the
// engine's own fold, learns why).
func TestEngine_StoppedSaysWhy(t *testing.T) {
	h := start(t, "", newFakeExec(succeed))
	fenced := errors.New("lease agora/leader: leadership ended; refusing to commit")
	restore := store.SetFence(func() error { return fenced })
	defer restore()
	if _, _, err := h.eng.Submit(context.Background(), mkPlan(t, "first", 1, spec{ID: "a"}), orch.Checkout{}, "tester"); !errors.Is(err, fenced) {
		t.Fatalf("a fenced submission: %v, want the fence's error", err)
	}
	if err := <-h.done; !errors.Is(err, fenced) {
		t.Fatalf("the engine stopped with %v, want the fence's error", err)
	}
	h.cancel = nil
	_, _, err := h.eng.Submit(context.Background(), mkPlan(t, "later", 1, spec{ID: "a"}), orch.Checkout{}, "tester")
	if !errors.Is(err, orch.ErrStopped) || !errors.Is(err, fenced) {
		t.Errorf("a submission after the stop: %v, want ErrStopped and the fence's error", err)
	}
	if _, err := h.eng.Stats(context.Background()); !errors.Is(err, fenced) {
		t.Errorf("stats after the stop: %v, want the fence's error", err)
	}
	h.db.Close()
}
