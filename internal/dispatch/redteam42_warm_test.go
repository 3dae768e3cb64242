package dispatch_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// TestRedTeam42_WarmSlotLearnsNoLifeline: the cold dispatch a warm pool learns its shape
// from ran with a lifeline (its supervisor's pipe, AGORA_WORKER_LIFELINE_FD), which must not
// become part of the shape: a slot's worker started ahead would name a descriptor it does not
// hold (the worker refuses to start) or one that is another pipe of the slot, and the slot's
// files would count one too many. The slot's worker holds no lifeline variable, the template
// names none, and the dispatch that claims the slot finishes.
func TestRedTeam42_WarmSlotLearnsNoLifeline(t *testing.T) {
	e, w := warmEnv(t, 1)
	e.subagent("hello", `echo made > hello.txt`)
	cold := e.run(dispatch.Request{Subagent: "hello"})
	if cold.State != lifecycle.DispatchFinished {
		t.Fatalf("cold: %s %s %s", cold.State, cold.Reason, cold.Detail)
	}
	waitWarmReady(t, w, 1)
	tmpl, err := os.ReadFile(filepath.Join(e.d.StateDir, ".warm", config.DefaultTarget, "template.json"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if strings.Contains(string(tmpl), wire.LifelineFDEnv) {
		t.Errorf("the stored template names the cold dispatch's lifeline: %s", tmpl)
	}
	env, err := os.ReadFile("/proc/" + strconv.Itoa(slotWorker(t, e.d.StateDir)) + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(env), wire.LifelineFDEnv+"=") {
		t.Errorf("the slot's worker was started with a lifeline variable: %q", env)
	}
	hot := e.run(dispatch.Request{Subagent: "hello"})
	if hot.State != lifecycle.DispatchFinished || !strings.Contains(e.patch(hot), "+made") {
		t.Fatalf("warm: %s %s %s", hot.State, hot.Reason, hot.Detail)
	}
	if c := warmCounts(w); c.Claimed != 1 || c.Cold != 0 {
		t.Fatalf("after the warm dispatch: %+v, want claimed 1", c)
	}
}
