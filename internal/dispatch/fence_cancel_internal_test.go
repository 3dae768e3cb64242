package dispatch

import (
	"context"
	"errors"
	"testing"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/store"
)

type countingProvider struct {
	compute.Provider
	cancels int
}

func (p *countingProvider) Cancel(context.Context, string) error { p.cancels++; return nil }

type taskHandle struct{ compute.Handle }

func (taskHandle) TaskID() string { return "ns/agora-x" }

// TestCancelUnfenced: a supervisor under a closed leader fence stops no task (the new leader
// may have adopted it); an unfenced one does.
func TestCancelUnfenced(t *testing.T) {
	p := &countingProvider{}
	restore := store.SetFence(func() error { return errors.New("leadership ended") })
	cancelUnfenced(t.Context(), p, taskHandle{})
	restore()
	if p.cancels != 0 {
		t.Errorf("a fenced supervisor cancelled the task %d times", p.cancels)
	}
	cancelUnfenced(t.Context(), p, taskHandle{})
	if p.cancels != 1 {
		t.Errorf("an unfenced supervisor cancelled the task %d times, want 1", p.cancels)
	}
}
