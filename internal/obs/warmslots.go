package obs

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agora-dev/agora/internal/compute/warm"
)

// WarmSlots reads a serve's warm slots (its standby supervisors) when scraped: ready
// and wanted per target as gauges, claimed, cold fallbacks and failed fills as counters.
type WarmSlots struct{ Counts func() []warm.Counts }

// warmDescSet describes the warm slot metrics; made on first scrape, not at init.
type warmDescSet struct{ ready, want, claimed, cold, failed *prometheus.Desc }

var warmDescs = sync.OnceValue(func() warmDescSet {
	t := []string{"target"}
	return warmDescSet{
		ready:   prometheus.NewDesc("agora_warm_slots_ready", "Warm slots started and waiting for a dispatch, by target.", t, nil),
		want:    prometheus.NewDesc("agora_warm_slots_wanted", "The target's warm: setting.", t, nil),
		claimed: prometheus.NewDesc("agora_warm_slots_claimed_total", "Dispatches that ran in a warm slot, by target.", t, nil),
		cold:    prometheus.NewDesc("agora_warm_slots_cold_fallback_total", "Dispatches of a warm target that found no slot of their shape and started cold.", t, nil),
		failed:  prometheus.NewDesc("agora_warm_slots_failed_total", "Warm slots that failed to start or died before a claim.", t, nil),
	}
})

// Describe implements prometheus.Collector.
func (w WarmSlots) Describe(ch chan<- *prometheus.Desc) {
	d := warmDescs()
	for _, x := range []*prometheus.Desc{d.ready, d.want, d.claimed, d.cold, d.failed} {
		ch <- x
	}
}

// Collect implements prometheus.Collector.
func (w WarmSlots) Collect(ch chan<- prometheus.Metric) {
	d := warmDescs()
	for _, c := range w.Counts() {
		ch <- prometheus.MustNewConstMetric(d.ready, prometheus.GaugeValue, float64(c.Ready), c.Target)
		ch <- prometheus.MustNewConstMetric(d.want, prometheus.GaugeValue, float64(c.Want), c.Target)
		ch <- prometheus.MustNewConstMetric(d.claimed, prometheus.CounterValue, float64(c.Claimed), c.Target)
		ch <- prometheus.MustNewConstMetric(d.cold, prometheus.CounterValue, float64(c.Cold), c.Target)
		ch <- prometheus.MustNewConstMetric(d.failed, prometheus.CounterValue, float64(c.Failed), c.Target)
	}
}
