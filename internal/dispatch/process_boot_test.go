package dispatch_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/compute/host"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// TestReap_SupervisorOfAnEarlierBoot: after a reboot, a started dispatch's recorded
// supervisor can match, pid and start time alike, a process of the new boot: with a
// deterministic VM or container boot, the freshly started `agora orch serve` itself. Reap
// took the dispatch for supervised and left it live for ever. The name carries the boot it
// was made in: this very process's pid and start time with an earlier boot's id is reaped
// (failed/lost, the task stopped), while this boot's name, and the form from before boot
// ids, still hold the dispatch.
func TestReap_SupervisorOfAnEarlierBoot(t *testing.T) {
	boot, err := host.BootID()
	if err != nil {
		t.Skipf("SKIP: no boot id here: %v", err)
	}
	self := dispatch.SelfSupervisor()
	pidStart, ok := strings.CutSuffix(self, ":"+boot)
	if !ok {
		t.Fatalf("SelfSupervisor() = %q carries no boot id %q", self, boot)
	}
	earlier := pidStart + ":" + "0123456789abcdef0123456789abcdef"
	e := newEnv(t)
	e.subagent("long", "sleep 1000")
	for _, c := range []struct {
		name, supervisor string
		reaped           bool
	}{
		{"this boot's", self, false},
		{"from before boot ids", pidStart, false},
		{"an earlier boot's", earlier, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := e.d.Accept(t.Context(), dispatch.Request{Subagent: "long", Actor: "test", Timeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if err := e.d.Records.Started(t.Context(), r.ID, "task-of-"+r.ID, c.supervisor); err != nil {
				t.Fatal(err)
			}
			p := &orderProvider{records: e.d.Records, id: r.ID}
			e.d.LocalProvider = p
			if _, err := e.d.Reap(t.Context()); err != nil {
				t.Fatalf("Reap: %v", err)
			}
			got, err := e.d.Records.Get(t.Context(), r.ID)
			if err != nil {
				t.Fatal(err)
			}
			if c.reaped {
				if got.State != lifecycle.DispatchFailed || got.Reason != lifecycle.ReasonLost || p.state == "" {
					t.Fatalf("supervisor %q: state %s/%s, task stopped %v; want failed/lost and stopped", c.supervisor, got.State, got.Reason, p.state != "")
				}
				return
			}
			if got.State != lifecycle.DispatchStarted || p.state != "" {
				t.Fatalf("supervisor %q (this process): state %s/%s, task stopped %v; want it left started", c.supervisor, got.State, got.Reason, p.state != "")
			}
			// Ended here, so the next case's Reap finds only its own.
			if _, err := e.d.Records.Finish(t.Context(), r.ID, dispatch.Outcome{State: lifecycle.DispatchCancelled, Reason: lifecycle.ReasonCancelled}); err != nil {
				t.Fatal(err)
			}
		})
	}
}
