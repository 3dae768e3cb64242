package orch

import "sync"

// MemoryLimit is the soft memory limit of agora orch serve with nothing in memory (unless
// GOMEMLIMIT is set): without a limit the Go runtime lets the heap grow to twice the live
// size before it collects.
const MemoryLimit = 80 << 20

// TaskMemory is the limit's allowance for each task of an open run: about twice what such a
// task keeps in the heap (its spec, its node, its map entries and its strings: about 1 KB in
// BenchmarkScale's plan), so the collector has room to work instead of running without end.
const TaskMemory = 2 << 10

// ParseMemory is the limit's allowance for each byte of a plan being parsed: the YAML
// reader's node tree of a 100,000-task plan holds about 30 bytes for each byte of its
// source until the plan is built. Under a limit without it the collector runs back to back
// for as long as the parse takes.
const ParseMemory = 32

// MemoryLimitFor is serve's soft memory limit while its engine holds tasks tasks of open
// runs ([Options.Held]) and nothing is being parsed. A fixed limit under what the engine must
// keep makes the collector run without end and take most of the CPU; this one grows with the
// work and shrinks back.
func MemoryLimitFor(tasks int) int64 { return MemoryLimit + int64(tasks)*TaskMemory }

// Memory keeps serve's soft memory limit at what serve holds: [MemoryLimitFor] the tasks of
// its open runs ([Memory.Held], given to [Options.Held]) and [ParseMemory] for each byte of
// the plans being parsed ([Memory.Parsing]). It is safe for concurrent use: plans are parsed
// on request goroutines, tasks are counted on the engine's.
type Memory struct {
	set     func(int64)
	mu      sync.Mutex
	tasks   int
	parsing int64
}

// NewMemory returns a Memory that applies each limit with set (debug.SetMemoryLimit; nil
// when the limit is not serve's to choose, as when GOMEMLIMIT is set), starting from
// [MemoryLimit].
func NewMemory(set func(int64)) *Memory {
	m := &Memory{set: set}
	m.apply()
	return m
}

// Held sets the tasks of open runs the engine holds.
func (m *Memory) Held(tasks int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tasks = tasks
	m.apply()
}

// Parsing adds n bytes of plan being parsed until done is called (once; later calls do
// nothing).
func (m *Memory) Parsing(n int) (done func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.parsing += int64(n)
	m.apply()
	var once sync.Once
	return func() {
		once.Do(func() {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.parsing -= int64(n)
			m.apply()
		})
	}
}

// Limit is the limit for what is held now.
func (m *Memory) Limit() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.limit()
}

func (m *Memory) limit() int64 { return MemoryLimitFor(m.tasks) + m.parsing*ParseMemory }

// apply sets the limit; m.mu is held.
func (m *Memory) apply() {
	if m.set != nil {
		m.set(m.limit())
	}
}
