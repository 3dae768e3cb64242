package mcphost

import (
	"testing"
	"time"
)

// TestEndSignals_KeptAWhileThenDropped: a tracked dispatch's signal is handed out while open
// and for endSignalKeep after it closed (a waiter joining just after the end reads at once),
// then dropped; an untracked dispatch has none (the MCP server polls it as before).
func TestEndSignals_KeptAWhileThenDropped(t *testing.T) {
	m := &Dispatcher{}
	if m.Ended("D0") != nil {
		t.Fatal("an untracked dispatch has an end signal")
	}
	t0 := time.Unix(1e9, 0)
	d1 := make(chan struct{})
	m.ends.track("D1", d1, t0)
	m.ends.track("D2", nil, t0) // no signal: nothing kept
	if m.Ended("D1") == nil || m.Ended("D2") != nil {
		t.Fatal("track kept the wrong signals")
	}
	close(d1)
	m.ends.track("D3", make(chan struct{}), t0.Add(time.Second)) // sees D1 closed
	if m.Ended("D1") == nil {
		t.Fatal("a signal just closed was dropped: a waiter joining now would wait for a poll")
	}
	m.ends.track("D4", make(chan struct{}), t0.Add(time.Second+endSignalKeep+time.Second))
	if m.Ended("D1") != nil {
		t.Fatal("a signal closed longer than endSignalKeep ago is still kept")
	}
	if m.Ended("D3") == nil || m.Ended("D4") == nil {
		t.Fatal("open signals were dropped")
	}
}
