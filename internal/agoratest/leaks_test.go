package agoratest

import (
	"testing"
	"time"
)

// TestNoLeaks: a failed run keeps its code; a clean one passes; one that leaves a goroutine
// running fails.
func TestNoLeaks(t *testing.T) {
	if got := NoLeaks(3); got != 3 {
		t.Errorf("NoLeaks(3) = %d, want 3", got)
	}
	if got := NoLeaks(0); got != 0 {
		t.Fatalf("NoLeaks(0) with nothing left running = %d, want 0", got)
	}
	stop := make(chan struct{})
	go func() { <-stop }()
	defer close(stop)
	start := time.Now()
	if got := NoLeaks(0); got != 1 {
		t.Errorf("NoLeaks(0) with a goroutine left running = %d, want 1", got)
	}
	t.Logf("goleak took %s to give up", time.Since(start))
}
