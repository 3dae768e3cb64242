package obs

import (
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agora-dev/agora/internal/lifecycle"
)

// TestEngineGauges_EveryState: the runs and tasks gauges have a series for every state
// internal/lifecycle lists, zero included, so a new state gets its series without a change
// in obs and a dashboard never misses one (a rejected fix is a task state too).
func TestEngineGauges_EveryState(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(EngineGauges{Engine: idleEngine{}})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "state" {
					got[mf.GetName()] = append(got[mf.GetName()], l.GetValue())
				}
			}
		}
	}
	for name, want := range map[string][]string{
		"agora_orch_runs":  lifecycle.RunStates(),
		"agora_orch_tasks": lifecycle.TaskStates(),
	} {
		slices.Sort(want)
		slices.Sort(got[name])
		if !slices.Equal(got[name], want) {
			t.Errorf("%s: series for states %q, want %q", name, got[name], want)
		}
	}
}
