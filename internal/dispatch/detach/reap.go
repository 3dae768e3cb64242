package detach

import (
	"context"
	"time"
)

// ReapEvery bounds how often [Supervisors.Reap] looks for dispatches whose supervisor died: a
// long-lived server answering a describe loop must not pay for that scan on every call, and a
// dead supervisor shows within this long.
const ReapEvery = time.Second

// Reap ends live dispatches whose supervisor is gone, at most once per [ReapEvery]; a call in
// between, or one racing another, does nothing.
func (s *Supervisors) Reap(ctx context.Context) error {
	now := time.Now().UnixNano()
	last := s.reapedAt.Load()
	if now-last < int64(ReapEvery) || !s.reapedAt.CompareAndSwap(last, now) {
		return nil
	}
	_, err := s.Reaper.Reap(ctx)
	return err
}
