package lease

import (
	"strings"
	"testing"
	"time"
)

func TestFence_ShutUntilRenewed(t *testing.T) {
	f := NewFence("agora/leader", 10*time.Second)
	if err := f.Check(); err == nil || !strings.Contains(err.Error(), "agora/leader") {
		t.Fatalf("a fence never renewed: %v, want an error naming the lease", err)
	}
	f.Renewed(time.Now())
	if err := f.Check(); err != nil {
		t.Fatalf("just renewed: %v", err)
	}
	f.Shut()
	if err := f.Check(); err == nil || !strings.Contains(err.Error(), "leadership ended") {
		t.Fatalf("after Shut: %v", err)
	}
	f.Renewed(time.Now())
	if err := f.Check(); err == nil {
		t.Fatal("a renew reopened a shut fence")
	}
}

// TestFence_Deadline: the fence closes at the renew's send time + 4/5 of the duration, on the
// monotonic clock (the test moves the clock the fence reads, not the wall).
func TestFence_Deadline(t *testing.T) {
	f := NewFence("agora/leader", 10*time.Second)
	var elapsed time.Duration
	f.since = func(time.Time) time.Duration { return elapsed }
	sent := f.base.Add(time.Second) // keeps base's monotonic reading
	f.Renewed(sent)
	for _, c := range []struct {
		at   time.Duration
		open bool
	}{{time.Second, true}, {8*time.Second + time.Second - time.Nanosecond, true}, {9 * time.Second, false}, {time.Hour, false}} {
		elapsed = c.at
		if err := f.Check(); (err == nil) != c.open {
			t.Errorf("at %s after base: check %v, want open %v", c.at, err, c.open)
		}
	}
	// An older renew (a slow request answered late) never moves the deadline back.
	elapsed = 2 * time.Second
	f.Renewed(f.base.Add(5 * time.Second))
	f.Renewed(f.base)
	elapsed = 12*time.Second + 999*time.Millisecond
	if err := f.Check(); err != nil {
		t.Errorf("a late answer to an older renew moved the deadline back: %v", err)
	}
}

// TestFence_ClockJump is the attack of a wall clock that jumps: a renew time with no monotonic
// reading (what a parsed time, the Lease's renewTime or a stepped clock gives) must not open
// the fence, however far in the future it says it is.
func TestFence_ClockJump(t *testing.T) {
	f := NewFence("agora/leader", 10*time.Second)
	f.Renewed(time.Now().Add(time.Hour).Round(0))
	if err := f.Check(); err == nil {
		t.Fatal("a wall-clock renew time an hour ahead opened the fence")
	}
	f.Renewed(time.Now())
	before := f.deadline.Load()
	f.Renewed(time.Now().Add(24 * time.Hour).Round(0))
	if f.deadline.Load() != before {
		t.Fatal("a wall-clock renew time moved an open fence's deadline")
	}
}

// BenchmarkFence_Check is the fence's own cost, paid once per commit.
func BenchmarkFence_Check(b *testing.B) {
	f := NewFence("agora/leader", time.Hour)
	f.Renewed(time.Now())
	b.ReportAllocs()
	for b.Loop() {
		if err := f.Check(); err != nil {
			b.Fatal(err)
		}
	}
}
