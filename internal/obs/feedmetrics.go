package obs

import "github.com/prometheus/client_golang/prometheus"

// feedMetrics are the counters and histograms the audit feed derives from agora.db.
type feedMetrics struct {
	dispatchesStarted *prometheus.CounterVec
	dispatchesEnded   *prometheus.CounterVec
	startup           prometheus.Histogram
	duration          *prometheus.HistogramVec
	phase             *prometheus.HistogramVec
	gateway           *prometheus.CounterVec
	modelCalls        *prometheus.CounterVec
	modelTokens       *prometheus.CounterVec
	modelCost         *prometheus.CounterVec
	toolCalls         *prometheus.CounterVec
	egress            *prometheus.CounterVec
	mcp               *prometheus.CounterVec
	feedErrors        prometheus.Counter
}

// phaseBuckets span a worker's phases: a verify of milliseconds to an agent of an hour.
var phaseBuckets = []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}

func newFeedMetrics() feedMetrics {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	return feedMetrics{
		dispatchesStarted: counter("agora_dispatches_started_total", "Dispatches accepted (recorded, about to be supervised), by target.", "target"),
		dispatchesEnded:   counter("agora_dispatches_ended_total", "Dispatches that reached a terminal state, by state and failure reason.", "state", "reason"),
		startup: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "agora_dispatch_startup_seconds", Buckets: phaseBuckets,
			Help: "From a dispatch's accept to its sandbox running (staging, clone, secrets, sandbox start), for dispatches that started.",
		}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "agora_dispatch_duration_seconds", Buckets: phaseBuckets,
			Help: "From a dispatch's accept to its terminal state, by state.",
		}, []string{"state"}),
		phase: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "agora_dispatch_phase_seconds", Buckets: phaseBuckets,
			Help: "The worker's timed phases inside the sandbox (verify, setup, agent, capture, ...), by phase.",
		}, []string{"phase"}),
		gateway:     counter("agora_gateway_requests_total", "Requests the per-dispatch gateway served or refused, by route and decision.", "route", "decision"),
		modelCalls:  counter("agora_model_calls_total", "Model calls that reported usage, by subagent and model.", "subagent", "model"),
		modelTokens: counter("agora_model_tokens_total", "Model tokens by subagent, model and type (input, output, cached; cached is part of input).", "subagent", "model", "type"),
		modelCost:   counter("agora_model_cost_usd_total", "Model cost in US dollars at agora.yaml's prices, by subagent and model.", "subagent", "model"),
		toolCalls:   counter("agora_tool_calls_total", "Tool calls inside sandboxes, by tool and decision.", "tool", "decision"),
		egress:      counter("agora_egress_decisions_total", "Egress proxy decisions: connections (connect) and refused requests (request), by decision.", "kind", "decision"),
		mcp:         counter("agora_mcp_calls_total", "MCP tool calls, by tool, client and decision.", "tool", "client", "decision"),
		feedErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "agora_metrics_feed_errors_total",
			Help: "Scrapes whose read of agora.db's audit log or dispatch records failed (the counters then lag until a later scrape reads it).",
		}),
	}
}

func (f *feedMetrics) all() []prometheus.Collector {
	return []prometheus.Collector{f.dispatchesStarted, f.dispatchesEnded, f.startup, f.duration, f.phase, f.gateway,
		f.modelCalls, f.modelTokens, f.modelCost, f.toolCalls, f.egress, f.mcp, f.feedErrors}
}
