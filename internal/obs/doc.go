// Package obs is agora's observability: the Prometheus registry and collectors behind
// /metrics, the /healthz and /readyz handlers, the log/slog setup of `agora orch serve`, and
// (trace.go) OpenTelemetry tracing from the standard OTEL_* variables.
//
// The packages where things happen never link Prometheus or OpenTelemetry: each declares a
// small interface at the point of the event (orch.Observer in the engine) and this package
// implements it; the CLI wires them. The worker and the MCP server are pinned free of both
// by internal/closure_test.go.
//
// # Where each metric is observed
//
// Dispatches run in detached supervisors (`agora dispatch supervise`), not in serve, and the
// CLI and the MCP server start dispatches of their own. So nothing that happens inside a
// dispatch is counted where it happens: serve derives it, when scraped, from what every
// process already writes durably, the audit log of agora.db ([AuditFeed] reads only the
// entries appended since the previous scrape) and the dispatch records of the dispatches
// those entries end. Every dispatch on the host is counted, whoever started it, and a count
// survives a restart of the supervisor or of serve (a restarted serve counts the whole log
// again: counters restart, as Prometheus expects of a restarted process).
//
//	agora_orch_*                     the engine, through orch.Observer, as batches commit
//	agora_orch_runs, _tasks, ...     gauges read from the engine (Engine.Stats) when scraped
//	agora_dispatches_*               dispatch.accepted and terminal dispatch.* audit entries
//	agora_dispatch_startup_seconds   the record: started_at - created_at (staging + sandbox start)
//	agora_dispatch_phase_seconds     the record: the worker's timed phases in result.json
//	agora_gateway_requests_total     tool.gateway and tool.gateway.refused entries
//	agora_model_*                    tool.gateway entries of model routes (model, tokens, cost)
//	agora_tool_calls_total           tool.call entries (the sandbox's tool decisions)
//	agora_egress_decisions_total     net.connect and net.request entries
//	agora_mcp_calls_total            mcp.tool.call and mcp.tool.denied entries
//	agora_audit_appends_total        every entry of agora.db's log (the feed) and orch.db's (the engine)
//	agora_audit_checkpoint_age_seconds  the newest checkpoint of each log, when scraped
//
// Labels hold only names from closed sets or from the catalog and agora.yaml, each value
// checked against a small alphabet and the number of values of each label capped ([labels]),
// so a sandbox or an MCP client cannot explode the series or smuggle a value into them. No
// label holds a host, a path, an argument or a secret.
package obs
