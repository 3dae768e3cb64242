package mcphost

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestRedTeam46_EndSignalsBoundedUnderChurn: a client that starts dispatch
// after dispatch, each ending at once, does not grow the end signals without bound: an ended
// dispatch's signal is dropped about endSignalKeep after its end, so what is kept is the
// dispatches of the last minute or so (and the ones still running), not every one ever.
func TestRedTeam46_EndSignalsBoundedUnderChurn(t *testing.T) {
	m := &Dispatcher{}
	t0 := time.Unix(1e9, 0)
	const n, every = 2000, 100 * time.Millisecond // 200 s of 10 dispatches a second
	running := make(chan struct{})                // one dispatch that runs throughout
	m.ends.track("running", running, t0)
	for i := range n {
		d := make(chan struct{})
		m.ends.track(fmt.Sprint(i), d, t0.Add(time.Duration(i+1)*every))
		close(d) // it ends at once
	}
	m.ends.mu.Lock()
	kept := len(m.ends.byID)
	m.ends.mu.Unlock()
	// Those ended within endSignalKeep (plus one pruneEvery: track scans at most that often)
	// of the last track, and the one seen just now.
	if max := int((endSignalKeep+pruneEvery)/every) + 3; kept > max {
		t.Errorf("%d signals kept after %d dispatches, want at most %d (those of the last %s)", kept, n, max, endSignalKeep)
	}
	if m.Ended("running") == nil {
		t.Error("a running dispatch's signal was dropped")
	}
	if m.Ended("0") != nil {
		t.Error("the first dispatch's signal, ended 200 s ago, is still kept")
	}
	if m.Ended(fmt.Sprint(n-1)) == nil {
		t.Error("the last dispatch's signal, just ended, was dropped")
	}
}

// TestRedTeam46_EndSignalsConcurrent (run under -race): dispatches tracked,
// looked up and ended from many goroutines at once (agora_dispatch calls and the polls of
// their waiters); each lookup gets its own dispatch's signal, never another's.
func TestRedTeam46_EndSignalsConcurrent(t *testing.T) {
	m := &Dispatcher{}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 200 {
				id := fmt.Sprintf("g%d-%d", g, i)
				d := make(chan struct{})
				m.ends.track(id, d, time.Now())
				if got := m.Ended(id); got != (<-chan struct{})(d) {
					t.Errorf("Ended(%s) is not its own signal", id)
					return
				}
				close(d)
				if got := m.Ended(id); got != nil && got != (<-chan struct{})(d) {
					t.Errorf("Ended(%s) after its end is another's signal", id)
					return
				}
			}
		})
	}
	wg.Wait()
}
