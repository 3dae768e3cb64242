package obs

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch"
)

// EngineStats is the engine as the gauges and /readyz see it.
type EngineStats interface {
	Stats(ctx context.Context) (orch.Stats, error)
}

// statsTimeout bounds how long a scrape or a readiness check waits for the engine, which
// answers between batches.
const statsTimeout = 2 * time.Second

// EngineGauges reads the engine's in-memory state when scraped: runs and tasks of open runs
// by state, the ready queue, live attempts, locks and waiters.
type EngineGauges struct{ Engine EngineStats }

// engineDescSet describes the engine gauges; made on first scrape, not at init.
type engineDescSet struct {
	up, runs, tasks, ready, live, locksHeld, lockWaiters, slotWaiters, backoffs *prometheus.Desc
}

var engineDescs = sync.OnceValue(func() engineDescSet {
	return engineDescSet{
		up:          prometheus.NewDesc("agora_orch_engine_up", "1 when the orchestrator engine answered this scrape, 0 when it did not (stopped or stuck).", nil, nil),
		runs:        prometheus.NewDesc("agora_orch_runs", "Open (unsealed) runs by state.", []string{"state"}, nil),
		tasks:       prometheus.NewDesc("agora_orch_tasks", "Tasks of open runs by state.", []string{"state"}, nil),
		ready:       prometheus.NewDesc("agora_orch_ready_queue", "Ready tasks not yet fired: waiting for a run slot or a lock.", nil, nil),
		live:        prometheus.NewDesc("agora_orch_live_attempts", "Attempts running now (a dispatch each).", nil, nil),
		locksHeld:   prometheus.NewDesc("agora_orch_locks_held", "Locks with at least one holder.", nil, nil),
		lockWaiters: prometheus.NewDesc("agora_orch_lock_waiters", "Ready tasks waiting for a lock.", nil, nil),
		slotWaiters: prometheus.NewDesc("agora_orch_slot_waiters", "Ready tasks waiting for a slot of their run's concurrency.", nil, nil),
		backoffs:    prometheus.NewDesc("agora_orch_backoffs", "Failed tasks waiting out a retry backoff.", nil, nil),
	}
})

// Describe implements prometheus.Collector.
func (g EngineGauges) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{engineDescs().up, engineDescs().runs, engineDescs().tasks, engineDescs().ready, engineDescs().live, engineDescs().locksHeld, engineDescs().lockWaiters, engineDescs().slotWaiters, engineDescs().backoffs} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (g EngineGauges) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), statsTimeout)
	defer cancel()
	s, err := g.Engine.Stats(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(engineDescs().up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(engineDescs().up, prometheus.GaugeValue, 1)
	// Every state is reported, zero included, so a series never vanishes while its runs do
	// and a new state gets its series without a change here.
	for _, st := range lifecycle.RunStates() {
		ch <- prometheus.MustNewConstMetric(engineDescs().runs, prometheus.GaugeValue, float64(s.RunStates[st]), st)
	}
	for _, st := range lifecycle.TaskStates() {
		ch <- prometheus.MustNewConstMetric(engineDescs().tasks, prometheus.GaugeValue, float64(s.TaskStates[st]), st)
	}
	ch <- prometheus.MustNewConstMetric(engineDescs().ready, prometheus.GaugeValue, float64(s.TaskStates[lifecycle.TaskReady]))
	ch <- prometheus.MustNewConstMetric(engineDescs().live, prometheus.GaugeValue, float64(s.LiveAttempts))
	ch <- prometheus.MustNewConstMetric(engineDescs().locksHeld, prometheus.GaugeValue, float64(s.LocksHeld))
	ch <- prometheus.MustNewConstMetric(engineDescs().lockWaiters, prometheus.GaugeValue, float64(s.LockWaiters))
	ch <- prometheus.MustNewConstMetric(engineDescs().slotWaiters, prometheus.GaugeValue, float64(s.SlotWaiters))
	ch <- prometheus.MustNewConstMetric(engineDescs().backoffs, prometheus.GaugeValue, float64(s.Backoffs))
}
