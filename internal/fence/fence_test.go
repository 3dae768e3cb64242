package fence_test

import (
	"errors"
	"testing"

	"github.com/agora-dev/agora/internal/fence"
)

// TestFence: no fence is an open one; a set fence answers for the process until its restore
// puts back the one it replaced.
func TestFence(t *testing.T) {
	if fence.IsSet() || fence.Check() != nil {
		t.Fatal("a process with no fence is fenced")
	}
	shut := errors.New("lease lost")
	restore := fence.Set(func() error { return shut })
	if !fence.IsSet() || !errors.Is(fence.Check(), shut) {
		t.Fatalf("a shut fence: set %v, check %v", fence.IsSet(), fence.Check())
	}
	inner := fence.Set(func() error { return nil })
	if !fence.IsSet() || fence.Check() != nil {
		t.Fatal("an open fence refuses")
	}
	inner()
	if !errors.Is(fence.Check(), shut) {
		t.Fatal("restore did not put back the fence it replaced")
	}
	restore()
	if fence.IsSet() {
		t.Fatal("the last restore left a fence")
	}
}
