package agoratest

import (
	"bytes"
	"sync"
)

// SyncBuffer is a bytes.Buffer a process (or its output goroutines) writes while the test reads
// it: exec.Cmd copies stdout and stderr on goroutines of its own, so a plain Buffer races.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
