// Package agentrun is the contract between the worker and a runtime's adapter, and the
// worker services an adapter calls: what an adapter is handed ([Invocation]) and returns
// ([Exit]); the client of the per-dispatch gateway ([Gateway]: the model, /fetch, the audit
// of tool calls and file writes, approvals, the worker's key); the loopback relay a
// host-installed CLI reaches its model through ([Relay]); the transcript the worker keeps
// ([Transcript]); and the helpers two runtimes share (the argument hash and call id the
// audit records, where a path resolves).
//
// It sits below both the worker and the adapters (internal/runtime/<dir>/<name>adapter), so
// an adapter never imports internal/worker and the worker reaches every adapter through
// one table (package runtimes/adapters). What only the worker does stays there: laying out
// and verifying the sandbox, outputs and out/outputs/final.md, the secrets, the stop step.
//
// agentrun runs in the sandbox: it links nothing host-only (internal/deps_test.go).
package agentrun
