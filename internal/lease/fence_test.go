package lease

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fakeClock is a boot clock the test moves by hand: one host's CLOCK_BOOTTIME.
type fakeClock struct{ n atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.n.Store(int64(time.Hour)) // a host up for an hour: instants well above 0
	return c
}

func (c *fakeClock) now() instant            { return instant(c.n.Load()) }
func (c *fakeClock) advance(d time.Duration) { c.n.Add(int64(d)) }

func TestFence_ShutUntilRenewed(t *testing.T) {
	f := NewFence("agora/leader", 10*time.Second)
	if err := f.Check(); err == nil || !strings.Contains(err.Error(), "agora/leader") {
		t.Fatalf("a fence never renewed: %v, want an error naming the lease", err)
	}
	f.renewed(bootNow())
	if err := f.Check(); err != nil {
		t.Fatalf("just renewed: %v", err)
	}
	f.Shut()
	if err := f.Check(); err == nil || !strings.Contains(err.Error(), "leadership ended") {
		t.Fatalf("after Shut: %v", err)
	}
	f.renewed(bootNow())
	if err := f.Check(); err == nil {
		t.Fatal("a renew reopened a shut fence")
	}
}

// TestFence_Deadline: the fence closes at the renew's send time + 4/5 of the duration, on the
// boot clock (the test moves the clock the fence reads, not the wall).
func TestFence_Deadline(t *testing.T) {
	f := NewFence("agora/leader", 10*time.Second)
	c := newFakeClock()
	f.now = c.now
	base := c.now()
	f.renewed(base.add(time.Second))
	for _, at := range []struct {
		at   time.Duration
		open bool
	}{{time.Second, true}, {8*time.Second + time.Second - time.Nanosecond, true}, {9 * time.Second, false}, {time.Hour, false}} {
		c.n.Store(int64(base.add(at.at)))
		if err := f.Check(); (err == nil) != at.open {
			t.Errorf("at %s after base: check %v, want open %v", at.at, err, at.open)
		}
	}
	// An older renew (a slow request answered late) never moves the deadline back.
	c.n.Store(int64(base.add(2 * time.Second)))
	f.renewed(base.add(5 * time.Second))
	f.renewed(base)
	c.n.Store(int64(base.add(12*time.Second + 999*time.Millisecond)))
	if err := f.Check(); err != nil {
		t.Errorf("a late answer to an older renew moved the deadline back: %v", err)
	}
}

// TestFence_SuspendShutsFence is the attack of a host suspended right after a renew: the boot
// clock jumps by the time asleep while Go's monotonic clock (CLOCK_MONOTONIC) does not move.
// The fence must be shut on resume, before any renew, however little monotonic time passed.
func TestFence_SuspendShutsFence(t *testing.T) {
	const d = 10 * time.Second
	f := NewFence("agora/leader", d)
	c := newFakeClock()
	f.now = c.now
	mono := time.Now()
	f.renewed(c.now())
	c.advance(time.Second)
	if err := f.Check(); err != nil {
		t.Fatalf("a second after the renew: %v", err)
	}
	c.advance(time.Hour) // asleep
	if err := f.Check(); err == nil || !strings.Contains(err.Error(), "not renewed in time") {
		t.Fatalf("after an hour suspended (%s of monotonic time): check %v, want the fence shut", time.Since(mono).Round(time.Millisecond), err)
	}
}

// TestFence_ClockJump is the attack of a wall clock that jumps (NTP, or by hand): nothing the
// fence or the elector compares is a wall time. A leader whose renews write record times an
// hour ahead or behind (its wall clock stepped) keeps a fence of exactly send + 4/5 of the
// duration on its boot clock, and a standby reading those record times waits the whole
// duration from its own read, whatever they say.
func TestFence_ClockJump(t *testing.T) {
	const d = 10 * time.Second
	for _, step := range []time.Duration{time.Hour, -time.Hour} {
		api := &memLeases{}
		ca, cb := newFakeClock(), newFakeClock()
		a, b := testElector(api, "replica-a", d), testElector(api, "replica-b", d)
		a.fence.now, b.fence.now = ca.now, cb.now
		sent := ca.now()
		if ok, _ := a.try(t.Context()); !ok {
			t.Fatal("replica-a did not create the Lease")
		}
		if got, want := instant(a.fence.deadline.Load()), sent.add(d-d/5); got != want {
			t.Errorf("step %s: fence ends %s after the send, want %s", step, got.sub(sent), want.sub(sent))
		}
		api.edit(func(l *coordv1.Lease) {
			renew, acquire := metav1.NewMicroTime(l.Spec.RenewTime.Add(step)), metav1.NewMicroTime(l.Spec.AcquireTime.Add(step))
			l.Spec.RenewTime, l.Spec.AcquireTime = &renew, &acquire
		})
		if ok, _ := b.try(t.Context()); ok {
			t.Fatalf("step %s: replica-b took a Lease it had just seen renewed", step)
		}
		cb.advance(d - time.Nanosecond)
		if ok, _ := b.try(t.Context()); ok {
			t.Errorf("step %s: replica-b took the Lease before a whole duration of its own clock passed", step)
		}
		cb.advance(time.Nanosecond)
		if ok, _ := b.try(t.Context()); !ok {
			t.Errorf("step %s: replica-b did not take the Lease after a whole duration unrenewed", step)
		}
	}
}

// TestBootNow_CountsMonotonic: the clock read is CLOCK_BOOTTIME, which is CLOCK_MONOTONIC
// plus the time suspended, so it never reads less than CLOCK_MONOTONIC read before it, and it
// does not go back.
func TestBootNow_CountsMonotonic(t *testing.T) {
	var mono unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &mono); err != nil {
		t.Fatal(err)
	}
	b1 := bootNow()
	if b1 < instant(mono.Nano()) {
		t.Fatalf("boot clock %d < monotonic %d: not CLOCK_BOOTTIME", b1, mono.Nano())
	}
	if b2 := bootNow(); b2 < b1 {
		t.Fatalf("boot clock went back: %d then %d", b1, b2)
	}
}

// BenchmarkFence_Check is the fence's own cost, paid once per commit: on the boot clock it
// reads (a clock_gettime(CLOCK_BOOTTIME) system call: the vDSO serves only the clocks Go's
// runtime reads) and, as the same run's baseline, on Go's monotonic clock (vDSO), which the
// fence read before it had to count a suspend.
//
//	go test ./internal/lease -run '^$' -bench 'Fence_Check' -benchmem -count 5
func BenchmarkFence_Check(b *testing.B) {
	base := time.Now()
	for _, c := range []struct {
		name string
		now  clock
	}{{"boottime", bootNow}, {"monotonic", func() instant { return instant(time.Since(base)) + 1 }}} {
		b.Run(c.name, func(b *testing.B) {
			f := NewFence("agora/leader", time.Hour)
			f.now = c.now
			f.renewed(c.now())
			b.ReportAllocs()
			for b.Loop() {
				if err := f.Check(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
