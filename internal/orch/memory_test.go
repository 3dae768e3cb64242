package orch_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/agora-dev/agora/internal/orch"
)

// TestMemory: the limit is MemoryLimitFor the tasks held plus, for each byte being parsed,
// ParseMemory (YAML) or ParseMemoryJSON (a document starting with '{'), applied on every
// change; a parse's done gives its allowance back once, however often it is called; parses
// at once add up; with no setter (GOMEMLIMIT chose) nothing is applied.
func TestMemory(t *testing.T) {
	var mu sync.Mutex
	var set []int64
	m := orch.NewMemory(func(n int64) { mu.Lock(); set = append(set, n); mu.Unlock() })
	last := func() int64 { mu.Lock(); defer mu.Unlock(); return set[len(set)-1] }
	if got := last(); got != orch.MemoryLimit {
		t.Fatalf("a new Memory applied %d, want MemoryLimit %d", got, orch.MemoryLimit)
	}
	m.Held(1000)
	if got, want := last(), orch.MemoryLimitFor(1000); got != want {
		t.Errorf("Held(1000) applied %d, want %d", got, want)
	}
	yml := []byte(strings.Repeat("#", 1<<20))
	jsn := append([]byte(" \n{"), make([]byte, 2<<20-3)...)
	done := m.Parsing(yml)
	other := m.Parsing(jsn)
	if got, want := last(), orch.MemoryLimitFor(1000)+1<<20*orch.ParseMemory+2<<20*orch.ParseMemoryJSON; got != want || m.Limit() != want {
		t.Errorf("two parses applied %d (Limit %d), want %d", got, m.Limit(), want)
	}
	done()
	done()
	if got, want := last(), orch.MemoryLimitFor(1000)+2<<20*orch.ParseMemoryJSON; got != want {
		t.Errorf("after one parse's done (called twice) %d, want %d", got, want)
	}
	other()
	m.Held(0)
	if got := last(); got != orch.MemoryLimit {
		t.Errorf("with nothing held %d, want MemoryLimit %d", got, orch.MemoryLimit)
	}

	quiet := orch.NewMemory(nil)
	quiet.Held(5)
	quiet.Parsing([]byte("{}"))()
	if got := quiet.Limit(); got != orch.MemoryLimitFor(5) {
		t.Errorf("without a setter Limit is %d, want %d", got, orch.MemoryLimitFor(5))
	}
}
