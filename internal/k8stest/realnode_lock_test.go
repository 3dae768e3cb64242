package k8stest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The lock file names its holder, a waiter that gives up names it too, and the journal has a
// line for each acquire (with the wait) and release (with the hold), for each cluster.
func TestRealNodeLock_NamesItsHolderAndJournals(t *testing.T) {
	dir := t.TempDir()
	oldFile, oldJournal, oldWait := realNodeLockFile, realNodeJournal, realNodeLockWait
	t.Cleanup(func() { realNodeLockFile, realNodeJournal, realNodeLockWait = oldFile, oldJournal, oldWait })
	realNodeLockFile = filepath.Join(dir, "node.lock")
	realNodeJournal = filepath.Join(dir, "node.log")

	first := &Cluster{test: "TestFirst"}
	if err := lockRealNode(first); err != nil {
		t.Fatal(err)
	}
	holder, err := os.ReadFile(realNodeLockFile)
	if err != nil || !strings.Contains(string(holder), "test=TestFirst") || !strings.Contains(string(holder), "pid=") {
		t.Fatalf("the lock file says %q (%v), want the holder's pid and test", holder, err)
	}

	realNodeLockWait = 300 * time.Millisecond
	err = lockRealNode(&Cluster{test: "TestGivesUp"})
	if err == nil || !strings.Contains(err.Error(), "test=TestFirst") {
		t.Fatalf("a waiter that gives up: %v, want the holder named", err)
	}

	// (The waiter that gave up shows that a held node is not taken.)
	realNodeLockWait = time.Minute
	second := &Cluster{test: "TestSecond"}
	got := make(chan error, 1)
	go func() { got <- lockRealNode(second) }()
	unlockRealNode(first)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	unlockRealNode(second)

	journal, err := os.ReadFile(realNodeJournal)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`acquire pid=\d+ prog=\S+ test=TestFirst waited=\d+\.\ds`,
		`release pid=\d+ prog=\S+ test=TestFirst held=\d+\.\ds`,
		`acquire pid=\d+ prog=\S+ test=TestSecond waited=\d+\.\ds`,
		`release pid=\d+ prog=\S+ test=TestSecond held=\d+\.\ds`,
	}
	lines := strings.Split(strings.TrimSpace(string(journal)), "\n")
	if len(lines) != len(want) {
		t.Fatalf("journal:\n%s\nwant %d lines", journal, len(want))
	}
	for i, w := range want {
		if !regexp.MustCompile(w).MatchString(lines[i]) {
			t.Errorf("journal line %d: %q, want %s", i+1, lines[i], w)
		}
	}
}
