package lease

import (
	"time"

	"golang.org/x/sys/unix"
)

// instant is a reading of this host's CLOCK_BOOTTIME, in nanoseconds. Every time the fence
// and the elector compare (a renew's send, when a record was first seen, the last successful
// renew) is an instant, never a time.Time: Go's monotonic reading is CLOCK_MONOTONIC, which
// stops while the host is suspended (and, on some hypervisors, while a VM is paused), so a
// leader resumed after a takeover would find its fence still open for up to 4/5 of the
// duration. CLOCK_BOOTTIME is CLOCK_MONOTONIC plus the time spent suspended; like it, it is
// never stepped by NTP or by hand.
type instant int64

// clock reads an instant; bootNow in production, a fake in the tests that jump it.
type clock func() instant

// bootNow reads CLOCK_BOOTTIME. It does not allocate. The clock exists on every Linux since
// 2.6.39 (agora needs 5.9 for close_range) and the call cannot fail with a valid clock id and
// pointer. If it ever did, no reading would be safe for both sides (a late one opens a
// standby's takeover, an early one a leader's fence), so it panics: the process stops, and a
// stopped leader writes nothing.
func bootNow() instant {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		panic("lease: read CLOCK_BOOTTIME: " + err.Error())
	}
	return instant(ts.Nano())
}

// add is i moved by d.
func (i instant) add(d time.Duration) instant { return i + instant(d) }

// sub is the time from j to i.
func (i instant) sub(j instant) time.Duration { return time.Duration(i - j) }
