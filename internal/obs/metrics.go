package obs

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics is agora's Prometheus registry: the engine's counters and histograms (fed by
// [EngineObserver]), and the collectors registered with [Metrics.Register] that read their
// values when scraped. One per serve; its own registry, so nothing global leaks into it.
type Metrics struct {
	reg *prometheus.Registry

	transitions   *prometheus.CounterVec
	attemptsEnded *prometheus.CounterVec
	runsEnded     *prometheus.CounterVec
	lockWaits     prometheus.Counter
	reattached    prometheus.Counter
	transition    prometheus.Histogram
	commit        prometheus.Histogram
	appends       *prometheus.CounterVec

	feed  feedMetrics // what the audit feed derives (feed.go)
	hooks []func()    // run before the derived metrics are collected (the feed's catch-up)

	kinds, reasons *labels
}

// latencyBuckets suit durable SQLite commits: from a cached write to a slow fsync.
var latencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}

// NewMetrics makes the registry with the engine's metrics and the Go runtime's and process's
// standard collectors.
func NewMetrics() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agora_orch_transitions_total",
			Help: "Transitions the orchestrator committed, by audit entry kind (task.ready, task.fired, task.succeeded, task.retry_scheduled, run.ended, ...).",
		}, []string{"kind"}),
		attemptsEnded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agora_orch_attempts_ended_total",
			Help: "Task attempts (dispatches of a run) the orchestrator saw end, by task outcome and dispatch failure reason.",
		}, []string{"state", "reason"}),
		runsEnded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agora_orch_runs_ended_total",
			Help: "Runs that reached a terminal state, by state.",
		}, []string{"state"}),
		lockWaits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "agora_orch_lock_waits_total",
			Help: "Times a ready task had to wait for a lock another task held.",
		}),
		reattached: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "agora_orch_reattached_total",
			Help: "Running attempts a starting serve re-attached to.",
		}),
		transition: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "agora_orch_transition_seconds",
			Help:    "From the engine taking a batch's first event to its transitions being durable (apply, schedule, commit).",
			Buckets: latencyBuckets,
		}),
		commit: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "agora_orch_commit_seconds",
			Help:    "One group commit of orch.db (every row and audit entry of a batch, one fsync).",
			Buckets: latencyBuckets,
		}),
		appends: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agora_audit_appends_total",
			Help: "Audit entries appended, by log (agora.db, orch.db) and kind.",
		}, []string{"log", "kind"}),
		kinds:   newLabels(64),
		reasons: newLabels(32),
	}
	m.feed = newFeedMetrics()
	m.reg.MustRegister(m.transitions, m.attemptsEnded, m.runsEnded, m.lockWaits, m.reattached, m.transition, m.commit,
		derived{m}, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// derived collects the counters a scrape brings up to date: it runs the hooks (the audit
// feed reading what was appended since the last scrape) before collecting them, so one
// scrape sees everything written before it began.
type derived struct{ m *Metrics }

func (d derived) Describe(ch chan<- *prometheus.Desc) {
	d.m.appends.Describe(ch)
	for _, c := range d.m.feed.all() {
		c.Describe(ch)
	}
}

func (d derived) Collect(ch chan<- prometheus.Metric) {
	for _, h := range d.m.hooks {
		h()
	}
	d.m.appends.Collect(ch)
	for _, c := range d.m.feed.all() {
		c.Collect(ch)
	}
}

// Register adds collectors (the engine's gauges, the audit feed) to the registry.
func (m *Metrics) Register(cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := m.reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// Registry is the registry, for tests and for gathering.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus text format. It does no authentication: the
// web listener mounts it behind its token, and serve's --metrics listener is loopback unless
// opted in.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}
