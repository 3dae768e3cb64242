package claudeadapter

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

// The claude-code adapter's tests run it against the real gateway (the host side, imported by
// tests only) with the fake claude or the real CLI, and the real agora-worker as its hook;
// these helpers are the worker's tests' own.

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// memAuditor keeps the gateway's records; failKind makes records of that kind fail.
type memAuditor struct {
	mu       sync.Mutex
	records  []map[string]any
	kinds    []string
	failKind string
}

func (a *memAuditor) Record(_ context.Context, kind string, details map[string]any) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if kind == a.failKind {
		return errors.New("audit log unavailable")
	}
	a.kinds = append(a.kinds, kind)
	a.records = append(a.records, details)
	return nil
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}
