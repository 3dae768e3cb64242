package web

import (
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/oidcauth"
)

// TestFlows_Bounded: pending sign-ins are bounded (the oldest goes first), expire, are good
// for one callback, and a flood of started-and-taken flows leaves no list behind.
func TestFlows_Bounded(t *testing.T) {
	var f flows
	now := time.Now()
	add := func(state string, at time.Time) {
		f.add(&flow{req: oidcauth.AuthRequest{State: state}, expires: at.Add(flowTTL)}, at)
	}
	for i := range maxFlows + 10 {
		add("s"+strconv.Itoa(i), now)
	}
	if len(f.m) != maxFlows {
		t.Fatalf("%d flows pending, want at most %d", len(f.m), maxFlows)
	}
	if _, ok := f.take("s0", now); ok {
		t.Fatal("the oldest flow outlived a full table")
	}
	if _, ok := f.take("s20", now); !ok {
		t.Fatal("a recent flow was dropped")
	}
	if _, ok := f.take("s20", now); ok {
		t.Fatal("a state was good twice")
	}
	if _, ok := f.take("s21", now.Add(flowTTL)); ok {
		t.Fatal("an expired flow was taken")
	}
	later := now.Add(flowTTL + time.Second)
	for i := range 10 * maxFlows {
		st := "t" + strconv.Itoa(i)
		add(st, later)
		if _, ok := f.take(st, later); !ok {
			t.Fatal("a fresh flow was lost")
		}
	}
	if len(f.m) > 1 || len(f.order) > 2*len(f.m)+65 {
		t.Fatalf("after a flood of taken flows: %d pending, %d listed", len(f.m), len(f.order))
	}
}

// TestRedTeam33_FlowsPerSource: a full table drops the oldest flow of the source holding the
// most, never another source's: a flood from one source loses its own oldest, another
// source's flow, older than all of them, stays; the counts follow takes and drops.
func TestRedTeam33_FlowsPerSource(t *testing.T) {
	var f flows
	now := time.Now()
	a := netip.MustParsePrefix("192.0.2.1/32")
	b := netip.MustParsePrefix("192.0.2.2/32")
	f.add(&flow{req: oidcauth.AuthRequest{State: "b0"}, expires: now.Add(flowTTL), src: b}, now)
	for i := range 3 * maxFlows {
		f.add(&flow{req: oidcauth.AuthRequest{State: "a" + strconv.Itoa(i)}, expires: now.Add(flowTTL), src: a}, now)
	}
	if f.bySrc[a] != maxFlows-1 || f.bySrc[b] != 1 || len(f.m) != maxFlows {
		t.Fatalf("a has %d flows pending, b %d, %d in all: want %d, 1 and %d", f.bySrc[a], f.bySrc[b], len(f.m), maxFlows-1, maxFlows)
	}
	if _, ok := f.take("a"+strconv.Itoa(3*maxFlows-maxFlows), now); ok {
		t.Fatal("a's flow beyond the table was kept")
	}
	if _, ok := f.take("a"+strconv.Itoa(3*maxFlows-1), now); !ok {
		t.Fatal("a's newest flow was dropped")
	}
	if _, ok := f.take("b0", now); !ok {
		t.Fatal("b's flow was dropped by a's")
	}
	if f.bySrc[a] != maxFlows-2 || f.bySrc[b] != 0 || len(f.order) > 2*len(f.m)+65 {
		t.Fatalf("counts after the takes: a %d, b %d, %d listed", f.bySrc[a], f.bySrc[b], len(f.order))
	}
	// Re-adding a state already pending replaces it without counting it twice.
	f.add(&flow{req: oidcauth.AuthRequest{State: "a" + strconv.Itoa(3*maxFlows-2)}, expires: now.Add(flowTTL), src: a}, now)
	if f.bySrc[a] != maxFlows-2 {
		t.Fatalf("a state added twice counts %d, want %d", f.bySrc[a], maxFlows-2)
	}
	// Expired flows go first, whoever started them.
	later := now.Add(flowTTL)
	f.add(&flow{req: oidcauth.AuthRequest{State: "b1"}, expires: later.Add(flowTTL), src: b}, later)
	if len(f.m) != 1 || len(f.bySrc) != 1 || f.bySrc[b] != 1 {
		t.Fatalf("after every flow expired: %d pending, counts %v", len(f.m), f.bySrc)
	}
}
