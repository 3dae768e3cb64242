// Package tracing is agora's OpenTelemetry tracing: a tracer provider configured only from the
// standard OTEL_* variables, exporting over OTLP/HTTP, and W3C traceparent propagation.
//
// With no OTLP endpoint set (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)
// a [Tracer] is off: every method is a no-op that allocates nothing and no connection is ever
// made. The packages where things happen (orch, dispatch, gateway) link none of this: each
// declares the small interface it needs and *Tracer implements it; the CLI wires them. The
// worker and the MCP server never link it (internal/closure_test.go).
//
// Attributes are fail-closed: only the keys in [allowedKeys] leave the process, strings are
// clipped, and only strings, integers, booleans, floats and string lists are kept. No caller
// passes an environment value, a key, a token, a prompt, a response body or file content;
// the allow-list stops a new attribute from leaking one before someone reviews it.
package tracing
