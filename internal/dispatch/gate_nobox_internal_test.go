package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/secret/redact"
	"github.com/agora-dev/agora/internal/verdict"
)

// startCounter is a provider that counts what it was asked to start, and starts nothing.
type startCounter struct {
	compute.Provider
	starts int
}

func (p *startCounter) Start(context.Context, compute.Spec) (compute.Handle, error) {
	p.starts++
	return nil, context.Canceled
}

// TestGate_NeverRunsUnsandboxed: accept refuses a verify gate on a `sandbox: none` target;
// a record accepted before that rule, reaching the gate, fails closed
// instead of running the plan author's command on the host as agora.
func TestGate_NeverRunsUnsandboxed(t *testing.T) {
	p := &startCounter{}
	r := &Record{ID: "01NOBOX", Sandbox: compute.SandboxNone}
	v, out := (&Dispatcher{}).runGateCommand(t.Context(), r, &stage{}, p, config.Target{},
		verdict.Spec{Command: []string{"sh", "-c", "cat /etc/shadow"}, Timeout: time.Minute}, t.TempDir(), redact.New(nil))
	if p.starts != 0 {
		t.Fatalf("the verify command was started %d times on an unsandboxed dispatch", p.starts)
	}
	if v != nil || out == nil || out.Reason != lifecycle.ReasonDenied {
		t.Fatalf("verdict %+v, outcome %+v; want no verdict and a %s outcome", v, out, lifecycle.ReasonDenied)
	}
}
