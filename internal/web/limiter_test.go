package web

import (
	"net/netip"
	"testing"
	"time"
)

// TestLoginLimiter_Bounded: however many sources fail, the table of sources stays bounded,
// and the addresses of one IPv6 /64 share a budget.
func TestLoginLimiter_Bounded(t *testing.T) {
	l := newLoginLimiter()
	for i := range 3 * maxLoginSources {
		l.failed(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}))
	}
	if n := l.size(); n > maxLoginSources {
		t.Errorf("%d sources kept, want at most %d", n, maxLoginSources)
	}
	a, b := netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::ffff:1234")
	for range loginBurst {
		if !l.failed(a) {
			t.Fatal("a source was limited within its burst")
		}
	}
	if l.allowed(b) || l.failed(b) {
		t.Error("another address of the same /64 is not limited with it")
	}
	if !l.allowed(netip.MustParseAddr("2001:db8:0:1::1")) {
		t.Error("another /64 is limited with it")
	}
	if !l.allowed(netip.MustParseAddr("::ffff:10.9.9.9")) || sourceOf("[::ffff:10.0.0.1]:5") != sourceOf("10.0.0.1:7") {
		t.Error("an IPv4-mapped address is not the IPv4 source")
	}
}

// TestLoginLimiter_Refills: a limited source gets its budget back with time.
func TestLoginLimiter_Refills(t *testing.T) {
	now := time.Unix(1e9, 0)
	l := newLoginLimiter()
	l.now = func() time.Time { return now }
	a := netip.MustParseAddr("192.0.2.7")
	for range loginBurst {
		l.failed(a)
	}
	if l.failed(a) {
		t.Fatal("not limited past the burst")
	}
	now = now.Add(time.Second)
	if !l.failed(a) {
		t.Error("still limited a second later")
	}
}
