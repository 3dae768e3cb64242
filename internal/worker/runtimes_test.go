package worker

import (
	"testing"

	"github.com/agora-dev/agora/internal/runtime/runtimes"
)

// TestRuntimeFor_EveryRuntimeHasAnAdapter: each runtime package runtimes describes can run in
// this worker, and a name it does not describe cannot.
func TestRuntimeFor_EveryRuntimeHasAnAdapter(t *testing.T) {
	for _, name := range runtimes.Names() {
		if _, err := runtimeFor(name); err != nil {
			t.Errorf("runtime %q: %v", name, err)
		}
	}
	if _, err := runtimeFor("shell"); err == nil {
		t.Error("runtimeFor(shell) = nil error, want refused")
	}
}
