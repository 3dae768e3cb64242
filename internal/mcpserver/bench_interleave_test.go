package mcpserver_test

import (
	"sync"
	"testing"
	"time"
)

// benchTurn is how many calls one side of an interleaved benchmark makes in its turn: about a
// quarter of a second on 2 cores, short beside the machine's changes of speed.
const benchTurn = 250

// side is one server of an interleaved benchmark, the clients that call it, and what its
// turns have measured.
type side struct {
	name    string
	srv     *server
	callers []func() error
	calls   int
	wall    time.Duration
	cpu     time.Duration // the server's, user and system
}

// interleave runs b.N calls against each side, in turns of benchTurn calls (first's, then
// second's, then second's again and first's: each side goes first as often), all of a side's
// callers at once, and reports each side's calls/s and server CPU per call, and first's rate
// over second's (ratio).
//
// Two servers measured one after the other, as the sdk and sdk-only benchmarks are, each get
// a few seconds of a machine whose speed changes over seconds (other tenants of the host, the
// client's own collections): their ratio moved by a fifth from one run to the next. In
// turns, a change of speed falls on both alike. The server CPU is read from /proc in 10 ms
// ticks, so each turn's is within a tick; over b.N calls that error is a small share.
func interleave(b *testing.B, first, second *side) {
	sides := []*side{first, second}
	for _, s := range sides {
		for _, c := range s.callers { // warm up: connections, caches
			if err := c(); err != nil {
				b.Fatal(err)
			}
		}
	}
	for done := 0; done < b.N; done += benchTurn {
		n := min(benchTurn, b.N-done)
		for _, s := range sides {
			s.turn(b, n)
		}
		// The side that went second goes first next, so whatever favours a place in the
		// order falls on both alike (one server on both sides, always in the same order,
		// measured the second 0.99-1.03x the first).
		sides[0], sides[1] = sides[1], sides[0]
	}
	for _, s := range []*side{first, second} {
		b.ReportMetric(float64(s.calls)/s.wall.Seconds(), s.name+"-calls/s")
		b.ReportMetric(float64(s.cpu.Microseconds())/float64(s.calls), s.name+"-server-cpu-us/call")
	}
	b.ReportMetric((float64(first.calls)/first.wall.Seconds())/(float64(second.calls)/second.wall.Seconds()), "ratio")
}

// turn makes n calls spread over the side's callers, one goroutine each.
func (s *side) turn(b *testing.B, n int) {
	work := make(chan struct{}, n)
	for range n {
		work <- struct{}{}
	}
	close(work)
	var wg sync.WaitGroup
	var failed sync.Once
	cpu := procCPU(b, s.srv.pid)
	start := time.Now()
	for _, c := range s.callers {
		wg.Go(func() {
			for range work {
				if err := c(); err != nil {
					failed.Do(func() { b.Errorf("%s: %v", s.name, err) })
				}
			}
		})
	}
	wg.Wait()
	s.wall += time.Since(start)
	s.cpu += procCPU(b, s.srv.pid) - cpu
	s.calls += n
}
