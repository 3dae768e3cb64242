package orch

import "sync"

// MemoryLimit is the soft memory limit of agora orch serve with nothing in memory (unless
// GOMEMLIMIT is set): without a limit the Go runtime lets the heap grow to twice the live
// size before it collects.
const MemoryLimit = 80 << 20

// TaskMemory is the limit's allowance for each task of an open run: about what such a task
// keeps in the heap (its node, its spec, its lists and strings: 600-650 bytes in
// BenchmarkScale's plan and serverss's), so that with [MemoryLimit] beside it the limit at
// 100,000 tasks (135 MB) is about twice what the engine holds, and the collector has room to
// work instead of running without end. A larger allowance only lets the heap grow further
// past what is live: at 2 KiB a task, serve's peak RSS at 100,000 tasks is over 300 MB.
const TaskMemory = 512

// ParseMemory is the limit's allowance for each byte of a YAML plan being parsed: the YAML
// reader's node tree of a 100,000-task plan holds about 30 bytes for each byte of its
// source until the plan is built. Under a limit without it the collector runs back to back
// for as long as the parse takes.
const ParseMemory = 32

// ParseMemoryJSON is the allowance for each byte of a plan given as JSON, which the plan
// reader decodes without a node tree: the parse holds about 5 bytes for each byte of the
// plan (BenchmarkParse100k), and serve holds the request's copy of it and the plan's own
// beside them. An allowance of YAML's would let the heap grow to twice the parse's size
// before a collection, and serve's peak with it.
const ParseMemoryJSON = 5

// parseMemory is the allowance for parsing src: [ParseMemoryJSON] a byte for a document
// whose first byte past blanks is '{' (the plan reader's JSON path), else [ParseMemory].
func parseMemory(src []byte) int64 {
	for _, c := range src {
		if c == ' ' || c == '\n' || c == '\r' {
			continue
		}
		if c == '{' {
			return int64(len(src)) * ParseMemoryJSON
		}
		break
	}
	return int64(len(src)) * ParseMemory
}

// MemoryLimitFor is serve's soft memory limit while its engine holds tasks tasks of open
// runs ([Options.Held]) and nothing is being parsed. A fixed limit under what the engine must
// keep makes the collector run without end and take most of the CPU; this one grows with the
// work and shrinks back.
func MemoryLimitFor(tasks int) int64 { return MemoryLimit + int64(tasks)*TaskMemory }

// Memory keeps serve's soft memory limit at what serve holds: [MemoryLimitFor] the tasks of
// its open runs ([Memory.Held], given to [Options.Held]) and an allowance for each byte of
// the plans being parsed ([Memory.Parsing]: [ParseMemoryJSON] or [ParseMemory]). It is safe
// for concurrent use: plans are parsed on request goroutines, tasks are counted on the
// engine's.
type Memory struct {
	set     func(int64)
	mu      sync.Mutex
	tasks   int
	parsing int64 // the allowance of the plans being parsed, in bytes
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

// Parsing adds the allowance for parsing plan src until done is called (once; later calls
// do nothing).
func (m *Memory) Parsing(src []byte) (done func()) {
	n := parseMemory(src)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.parsing += n
	m.apply()
	var once sync.Once
	return func() {
		once.Do(func() {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.parsing -= n
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

func (m *Memory) limit() int64 { return MemoryLimitFor(m.tasks) + m.parsing }

// apply sets the limit; m.mu is held.
func (m *Memory) apply() {
	if m.set != nil {
		m.set(m.limit())
	}
}
