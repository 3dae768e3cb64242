package agoratest

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// SettleGoroutines waits up to 10 s until the process runs at most base goroutines (what it
// ran before the test's work), and fails with every goroutine's stack if it never does: a
// goroutine the work left behind is a leak.
func SettleGoroutines(t testing.TB, base int, what string) {
	t.Helper()
	n := 0
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if n = runtime.NumGoroutine(); n <= base {
			return
		}
	}
	buf := make([]byte, 1<<16)
	buf = buf[:runtime.Stack(buf, true)]
	t.Fatalf("%s: %d goroutines, want at most %d as before:\n%s", what, n, base, buf)
}

// SettleBubble is SettleGoroutines for a test in a synctest bubble, whose clock is fake (a
// wall-clock settle would get no real time there): once every goroutine of the bubble waits
// (synctest.Wait, which the caller runs first), the bubble must hold at most base goroutines
// (what [BubbleGoroutines] counted before the test's work); it fails with the bubble's
// goroutines' stacks otherwise. Goroutines outside the bubble (the runtime's, other tests')
// are not counted, so nothing of theirs makes it flake.
func SettleBubble(t testing.TB, base int, what string) {
	t.Helper()
	if n, stacks := bubbleGoroutines(); n > base {
		t.Fatalf("%s: %d goroutines in the bubble, want at most %d as before:\n%s", what, n, base, stacks)
	}
}

// BubbleGoroutines counts the goroutines of the caller's synctest bubble (0 outside one).
func BubbleGoroutines() int {
	n, _ := bubbleGoroutines()
	return n
}

// bubbleGoroutines reads every goroutine's stack: the caller's own comes first, and its
// header names its bubble ("goroutine 7 [running, synctest bubble 1]:").
func bubbleGoroutines() (int, string) {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	gs := strings.Split(string(buf), "\n\n")
	bubble := bubbleOf(gs[0])
	if bubble == "" {
		return 0, ""
	}
	var in []string
	for _, g := range gs {
		if bubbleOf(g) == bubble {
			in = append(in, g)
		}
	}
	return len(in), strings.Join(in, "\n\n")
}

// bubbleOf is the "synctest bubble N" of a goroutine's stack header, or "".
func bubbleOf(stack string) string {
	header, _, _ := strings.Cut(stack, "\n")
	i := strings.Index(header, "synctest bubble ")
	if i < 0 {
		return ""
	}
	return strings.TrimRight(header[i:], "]:")
}
