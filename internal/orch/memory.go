package orch

import "sync"

// MemoryLimit is the soft memory limit of agora orch serve with nothing in memory (unless
// GOMEMLIMIT is set): without a limit the Go runtime lets the heap grow to twice the live
// size before it collects.
const MemoryLimit = 80 << 20

// TaskMemory is the limit's allowance for each task of an open run on top of [MemoryLimit]:
// a little under what such a task keeps ([TaskLive]), so that with MemoryLimit beside it
// the limit at 100,000 tasks (129 MB) is about twice what the engine holds and the collector
// has room to work instead of running without end. A larger allowance only lets the heap grow
// further past what is live: at 2 KiB a task, serve's peak RSS at 100,000 tasks is over
// 300 MB, at 512 bytes just over 200 MB.
const TaskMemory = 448

// TaskLive is about what a task of an open run keeps in the heap: its 192-byte node, its
// 176-byte spec, its lists and strings (500-560 bytes in BenchmarkScale's plan). Past
// 100,000 tasks MemoryLimit's headroom is spread too thin, and the limit is twice this a
// task instead ([MemoryLimitFor]).
const TaskLive = 560

// ParseMemory is the limit's allowance for each byte of a YAML plan being parsed: the YAML
// reader's node tree of a 100,000-task plan holds about 30 bytes for each byte of its
// source until the plan is built. Under a limit without it the collector runs back to back
// for as long as the parse takes.
const ParseMemory = 32

// ParseMemoryJSON is the allowance for each byte of a plan given as JSON, which the plan
// reader decodes without a node tree: the parse holds 5-6 bytes for each byte of the plan at
// its largest (BenchmarkParse100k), so with [MemoryLimit] beside it the limit stays about
// twice what a 12 MB plan's parse holds. An allowance of YAML's would let the heap grow
// to twice the parse's size before a collection, and serve's peak with it.
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
// runs ([Options.Held]) and nothing is being parsed: [MemoryLimit] and [TaskMemory] a task,
// or twice [TaskLive] a task when that is more (past about 125,000 tasks), so the heap may
// always grow to about twice what is live. A fixed limit under what the engine must keep
// makes the collector run without end and take most of the CPU; this one grows with the
// work and shrinks back.
func MemoryLimitFor(tasks int) int64 {
	return max(MemoryLimit+int64(tasks)*TaskMemory, 2*int64(tasks)*TaskLive)
}

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

func (m *Memory) limit() int64 { return MemoryLimitFor(m.tasks) + m.parsing }

// apply sets the limit; m.mu is held.
func (m *Memory) apply() {
	if m.set != nil {
		m.set(m.limit())
	}
}
