package obs

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agora-dev/agora/internal/compute/warm"
)

// TestWarmSlots_Collect: each target's counts become its series, as they are at the scrape.
func TestWarmSlots_Collect(t *testing.T) {
	counts := []warm.Counts{{Target: "local", Want: 4, Ready: 3, Claimed: 7, Cold: 2, Failed: 1}}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(WarmSlots{Counts: func() []warm.Counts { return counts }})
	check := func(want map[string]float64) {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				if l := m.GetLabel(); len(l) != 1 || l[0].GetName() != "target" || l[0].GetValue() != "local" {
					t.Fatalf("%s: labels %v, want target=local", mf.GetName(), l)
				}
				if g := m.GetGauge(); g != nil {
					got[mf.GetName()] = g.GetValue()
				} else {
					got[mf.GetName()] = m.GetCounter().GetValue()
				}
			}
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s = %v, want %v (all: %v)", k, got[k], v, got)
			}
		}
		if len(got) != len(want) {
			t.Errorf("series %v, want %v", got, want)
		}
	}
	check(map[string]float64{"agora_warm_slots_ready": 3, "agora_warm_slots_wanted": 4, "agora_warm_slots_claimed_total": 7,
		"agora_warm_slots_cold_fallback_total": 2, "agora_warm_slots_failed_total": 1})
	counts[0].Ready, counts[0].Claimed = 1, 9
	check(map[string]float64{"agora_warm_slots_ready": 1, "agora_warm_slots_wanted": 4, "agora_warm_slots_claimed_total": 9,
		"agora_warm_slots_cold_fallback_total": 2, "agora_warm_slots_failed_total": 1})
}
