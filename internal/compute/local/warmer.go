package local

import (
	"context"
	"errors"
	"fmt"

	"github.com/agora-dev/agora/internal/compute"
)

// Warmer keeps one target's bubblewrap slots ([Slot]) under its options' Dir: Fill is
// [Provider.NewSlot], Run [Provider.StartInSlotWith], Reap [ReapSlots] of the directory.
type Warmer struct {
	p    *Provider
	opts compute.WarmOptions
}

var (
	_ compute.WarmProvider     = (*Provider)(nil)
	_ compute.Warmer           = (*Warmer)(nil)
	_ compute.WarmSlot         = (*Slot)(nil)
	_ compute.ReleaseCommitter = (*Slot)(nil)
	_ compute.StageTaker       = (*Slot)(nil)
)

// Warmer returns the warmer of the slots laid out by o.
func (p *Provider) Warmer(o compute.WarmOptions) (compute.Warmer, error) {
	if o.Dir == "" {
		return nil, errors.New("warm slots: no directory to keep them under")
	}
	return &Warmer{p: p, opts: o}, nil
}

// Shape implements [compute.Warmer].
func (w *Warmer) Shape(s compute.Spec) string { return compute.SlotShape(s, w.opts) }

// Fill implements [compute.Warmer].
func (w *Warmer) Fill(ctx context.Context, tmpl compute.Spec) (compute.WarmSlot, error) {
	s, err := w.p.NewSlot(ctx, tmpl, w.opts)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Run implements [compute.Warmer]: commit runs before the held sandbox is released.
func (w *Warmer) Run(ctx context.Context, slot compute.WarmSlot, s compute.Spec, commit func(taskID string) error) (compute.Handle, error) {
	ls, ok := slot.(*Slot)
	if !ok || ls.p != w.p {
		slot.Discard()
		return nil, fmt.Errorf("start %q: not a slot of this provider: %w", s.ID, compute.ErrSlotShape)
	}
	return w.p.StartInSlotWith(ctx, ls, s, commit)
}

// Reap implements [compute.Warmer].
func (w *Warmer) Reap(ctx context.Context) error { return ReapSlots(ctx, w.opts.Dir) }

// CommitsBeforeRelease implements [compute.ReleaseCommitter]: a held bwrap waits on its block
// descriptor until the claim releases it.
func (s *Slot) CommitsBeforeRelease() bool { return true }
